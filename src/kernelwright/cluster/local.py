"""Local backend: one long-lived, spawned pool worker process per device.

The pool worker is a TRUSTED process (it plays the parent role of the gate for its device):
it is started in its own process group, pinned to its device before CUDA is initialised (see
``devices.pin_current_process``), and runs a ``JobRunner``.  The pool talks to it over a pipe:
``{"op": "job", "wire": ...}`` in, the runner's events out.  If the pool process goes away,
the worker kills its gate workers and exits.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from kernelwright.cluster.devices import DeviceSlot


class WorkerLost(RuntimeError):
    """The pool worker (or Ray actor) died or stopped answering while it had a job."""


# ------------------------------------------------------------------------------------------
# the pool worker process
def _watch_parent(parent_pid: int, runner_box: list) -> None:
    while True:
        time.sleep(2.0)
        if os.getppid() != parent_pid:
            if runner_box:
                runner_box[0].kill_all()
            os._exit(3)


def pool_worker_main(conn, slot: DeviceSlot, name: str, parent_pid: int, max_sessions: int,
                     log_root: Optional[str]) -> None:
    """Entry point of a pool worker (spawned)."""
    try:
        os.setpgid(0, 0)   # own process group: the pool can kill the worker and its gate workers together
    except Exception:
        pass
    runner_box: list = []
    threading.Thread(target=_watch_parent, args=(parent_pid, runner_box), daemon=True).start()
    from kernelwright.cluster.devices import describe_gpu, pin_current_process

    problem = pin_current_process(slot)
    if problem:
        conn.send({"op": "ready", "ok": False, "error": problem})
        return
    from kernelwright.cluster.runner import JobRunner, worker_info

    lock_key = None
    if slot.kind == "cuda":
        lock_key = describe_gpu(slot.gate_device).get("uuid") or f"gpu{slot.physical}"
    runner = JobRunner(slot.gate_device, name, slot.label, log_root=log_root, max_sessions=max_sessions,
                       lock_key=lock_key)
    runner_box.append(runner)
    try:
        conn.send({"op": "ready", "ok": True, **worker_info(runner)})
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg.get("op") == "exit":
                break
            if msg.get("op") == "job":
                for event in runner.run(msg["wire"]):
                    event["loaded"] = runner.loaded() if event["op"] == "done" else None
                    conn.send(event)
    finally:
        runner.close()
    # nothing left to flush but stdio: skip the interpreter's (slow, torch-heavy) teardown
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


# ------------------------------------------------------------------------------------------
# the pool's handle on one pool worker
@dataclass(eq=False)
class LocalWorker:
    """Parent-side handle of one pool worker process."""

    backend = "local"

    slot: DeviceSlot
    name: str
    max_sessions: int = 16
    log_root: Optional[str] = None
    start_timeout_s: float = 600.0
    proc: Any = field(default=None, init=False)
    conn: Any = field(default=None, init=False)
    info: Dict[str, Any] = field(default_factory=dict, init=False)

    @property
    def device(self) -> str:
        return self.slot.label

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> Dict[str, Any]:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=pool_worker_main, name=f"kw-pool-{self.name}",
                                args=(child, self.slot, self.name, os.getpid(), self.max_sessions, self.log_root))
        self.proc.start()
        child.close()
        self.conn = parent
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.conn.poll(0.5):
                try:
                    msg = self.conn.recv()
                except (EOFError, OSError) as exc:
                    self.kill()
                    raise WorkerLost(f"pool worker for {self.device} died while starting ({exc})") from exc
                if not msg.get("ok"):
                    self.kill()
                    raise WorkerLost(f"pool worker for {self.device} could not start: {msg.get('error')}")
                self.info = msg
                return msg
            if not self.proc.is_alive():
                code = self.proc.exitcode
                self.kill()
                raise WorkerLost(f"pool worker for {self.device} exited while starting (exit code {code})")
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerLost(f"pool worker for {self.device} not ready within {self.start_timeout_s:.0f} s")

    def run(self, wire: Dict[str, Any], on_event: Callable[[Dict[str, Any]], None], inactivity_s: float) -> None:
        """Send the job and relay its events until ``done``.  Raises WorkerLost."""
        try:
            self.conn.send({"op": "job", "wire": wire})
        except (OSError, EOFError, BrokenPipeError) as exc:
            raise WorkerLost(self._why(f"send failed: {exc}")) from exc
        last = time.monotonic()
        while True:
            try:
                ready = self.conn.poll(0.5)
                msg = self.conn.recv() if ready else None
            except (EOFError, OSError, ConnectionResetError) as exc:
                raise WorkerLost(self._why(f"connection closed: {type(exc).__name__}")) from exc
            if msg is not None:
                last = time.monotonic()
                on_event(msg)
                if msg.get("op") == "done":
                    return
                continue
            if not self.proc.is_alive():
                raise WorkerLost(self._why("process gone"))
            if time.monotonic() - last > inactivity_s:
                self.kill()
                raise WorkerLost(f"pool worker for {self.device} sent nothing for {inactivity_s:.0f} s; killed")

    def _why(self, what: str) -> str:
        code = None
        if self.proc is not None:
            self.proc.join(2)
            code = self.proc.exitcode
        self.kill()
        sig = ""
        if code is not None and code < 0:
            try:
                sig = f", {signal.Signals(-code).name}"
            except ValueError:
                pass
        return f"pool worker for {self.device} (pid {self.pid}) died: {what}; exit code {code}{sig}"

    def kill(self) -> None:
        """Kill the worker and everything it started (its process group)."""
        if self.proc is None:
            return
        pid = self.proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
        except Exception:
            pass
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is None:
            return
        if self.proc.is_alive() and self.conn is not None:
            try:
                self.conn.send({"op": "exit"})
                self.proc.join(timeout_s)
            except Exception:
                pass
        self.kill()
