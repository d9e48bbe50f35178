"""Parent side of the worker protocol: one spawned worker process per solution.

``WorkerSession`` starts the worker, sends it one message at a time and waits for the reply
with a timeout.  A worker that does not answer in time is killed (TIMEOUT); one that dies
(e.g. an illegal memory access, a segfault, ``os._exit``) is reported as RUNTIME_ERROR with
the tail of its log; either way the session can be restarted for the next workload.

Around every message the session snapshots the protected files (``guards.protected_roots``:
the gate's and the definitions' sources, the kernelwright cache, the results folder) and
reports any change as ``files_changed`` in the reply (FILE_TAMPERED).  The worker is started
without ``KERNELWRIGHT_HIDDEN_SALT`` in its environment, behind the OS boundary of
``gate/sandbox.py`` (its own uid, mount and PID namespaces where the machine allows; the level it
got is ``WorkerSession.boundary``, recorded in every trace as ``gate.notes.isolation``).
"""

from __future__ import annotations

import math
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch.multiprocessing as tmp

from kernelwright.gate import cuda_share, guards, sandbox, wire
from kernelwright.trace import Solution


_SPAWN_LOCK = threading.Lock()
# boundary levels that failed to start a worker in this process ({(level, device kind): why}):
# later sessions go straight to the next level
_FAILED_LEVELS: Dict[tuple, str] = {}
_LIVE_UIDS: set = set()


@dataclass
class Timeouts:
    """Seconds allowed per message (``load`` includes importing and building the solution).

    ``step_s`` (None by default): the per-call limit inside a timing op as well -- the longest
    wait for the worker's next message (each timed iteration exchanges two: its spec, its end),
    so a call that hangs in the timed loop fails after ``step_s`` rather than after the whole op's
    ``time_s``.  ``per_call(seconds)`` is what ``--timeout`` sets."""

    start_s: float = 180.0
    load_s: float = 900.0
    alloc_s: float = 120.0
    call_s: float = 300.0
    time_s: float = 600.0
    step_s: Optional[float] = None

    @classmethod
    def per_call(cls, seconds: Optional[float]) -> Optional["Timeouts"]:
        """The limits of ``--timeout SECONDS``: every call of the solution, in the correctness
        trials and in each timed iteration, may take at most ``seconds``; None keeps the defaults
        (``call_s`` 300 s, a timing op ``time_s`` 600 s in all)."""
        if seconds is None:
            return None
        return cls(call_s=float(seconds), step_s=float(seconds))

    def timing_op_s(self, calls: int) -> float:
        """The whole limit of a timing op of ``calls`` calls: ``time_s``, or with a per-call limit
        at least one ``step_s`` per call and one more (slow honest calls are not cut short)."""
        if self.step_s is None:
            return self.time_s
        return max(self.time_s, self.step_s * (calls + 1))


class WorkerSession:
    def __init__(self, solution: Solution, device: str, timeouts: Optional[Timeouts] = None,
                 trusted: bool = False, prepare: Optional[str] = None, log_dir: Optional[Path] = None,
                 protect: Optional[List[str]] = None, isolation: Optional[str] = None,
                 data_files: Optional[List[str]] = None, results_dir: Optional[Path] = None):
        """``results_dir``: the run's results folder, hidden from a bounded worker like the cache
        and the logs (``guards.boundary_hidden_dirs``); default the folder above ``log_dir``,
        which is also what the default ``protect`` watches."""
        self.solution = solution
        self.device = device
        self.timeouts = timeouts or Timeouts()
        self.trusted = trusted
        self.prepare = prepare
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kw-logs-"))
        self.results_dir = Path(results_dir) if results_dir else (self.log_dir.parent if log_dir else None)
        if protect is None:
            protect = guards.protected_roots(self.log_dir.parent if log_dir else None)
        self.protect = list(protect)
        self.data_files = list(data_files or [])   # read by the worker's input synthesis (blobs, definition JSON)
        self._logs: List[str] = []
        self.proc = None
        self._own_group = False
        self._paused = False
        self._peer = wire.Peer()
        self.conn = None
        self.load_reply: Dict[str, Any] = {}
        self.restarts = 0
        self._log_path = None
        self._log_offset = 0
        self.isolation = isolation          # None: $KERNELWRIGHT_ISOLATION, else auto (sandbox.requested_level)
        self.boundary: Optional[sandbox.Boundary] = None
        self.worker_pid: Optional[int] = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> Dict[str, Any]:
        """Spawn the worker behind the strongest boundary that works here (``sandbox``: the
        requested level, then each weaker one; a level that cannot be set up or whose worker
        does not come up is noted in ``boundary.fallbacks``) and load the solution; returns the
        load reply (``ok`` False on COMPILE_ERROR / TIMEOUT / RUNTIME_ERROR)."""
        self.close()
        sandbox.protect_parent()   # no worker may trace this process or read its memory
        requested = sandbox.requested_level(self.device, self.isolation)
        kind = "cuda" if str(self.device).startswith("cuda") else "cpu"
        fallbacks: List[str] = []
        for level in sandbox.levels_from(requested):
            why = sandbox.why_unavailable(level) or _FAILED_LEVELS.get((level, kind))
            if why:
                fallbacks.append(f"{level}: {why}")
                continue
            ready = self._spawn(level, requested, fallbacks)
            if ready.get("ok") or level == "none":
                break
            lines = [ln.strip() for ln in str(ready.get("error", "")).splitlines() if ln.strip()]
            why = "the worker did not start: " + (" / ".join(lines[:1] + lines[-1:]) if lines else "?")[:300]
            _FAILED_LEVELS[(level, kind)] = why
            fallbacks.append(f"{level}: {why}")
            self.close()
        if not ready.get("ok"):
            self.load_reply = ready
            return ready
        self.load_reply = self.request({"op": "load", "solution": self.solution.model_dump_json(),
                                        "trusted": self.trusted, "prepare": self.prepare}, self.timeouts.load_s)
        return self.load_reply

    def _spawn(self, level: str, requested: str, fallbacks: List[str]) -> Dict[str, Any]:
        """Start one worker behind ``level`` and wait for its ready message."""
        from kernelwright.gate import worker

        ctx = tmp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = str(self.log_dir / f"{self.solution.name}.worker{self.restarts}.log")
        self._logs.append(os.path.abspath(self._log_path))
        self._log_offset = 0
        self.boundary = sandbox.Boundary(requested, level, fallbacks=list(fallbacks))
        self.worker_pid, self._own_group = None, False
        log_fd, log_arg = None, self._log_path
        if level != "none":    # the set-up step makes the parent's descriptor the worker's stdout/stderr
            log_fd = os.open(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            log_arg = None
        try:
            launch = sandbox.plan_launch(level, self.device, log_fd,
                                         hide=guards.boundary_hidden_dirs(self.results_dir, self.log_dir),
                                         readonly=guards.boundary_readonly_dirs(),
                                         secret=guards.boundary_secret_files(), taken_uids=_LIVE_UIDS,
                                         data=self.data_files)
        except Exception:
            if log_fd is not None:
                os.close(log_fd)
            raise
        if launch.uid is not None:
            _LIVE_UIDS.add(launch.uid)
        self.boundary.uid, self.boundary.scratch = launch.uid, launch.scratch
        prefix, pass_fds, expect = launch.prefix, launch.pass_fds, launch.expect
        self.proc = ctx.Process(target=worker.main, args=(child, self.device, log_arg, expect), daemon=True)
        # the child inherits this process's multiprocessing temp directory (Process._config), where its
        # resource sharer would bind its socket: behind the boundary that directory is not there (a
        # private /tmp) or not the worker's to write; it makes its own under its TMPDIR instead
        getattr(self.proc, "_config", {}).pop("tempdir", None)
        try:
            with _SPAWN_LOCK:   # the worker must not inherit the hidden salt
                hidden = os.environ.pop("KERNELWRIGHT_HIDDEN_SALT", None)
                try:
                    with sandbox.launch_through(prefix, pass_fds):
                        self.proc.start()
                finally:
                    if hidden is not None:
                        os.environ["KERNELWRIGHT_HIDDEN_SALT"] = hidden
        finally:
            for fd in pass_fds:
                os.close(fd)
        child.close()
        self.conn = parent
        self._peer = wire.Peer()   # learns the worker's resource-sharer address from its ready message
        ready = self._wait(self.timeouts.start_s, None, {})
        # under "full" the worker is the grandchild of the process multiprocessing started
        # (unshare --fork, then the PID namespace's init)
        self.worker_pid = sandbox.worker_pid_of(level, self.proc.pid)
        try:   # the worker made itself a process-group leader (os.setsid) before replying
            self._own_group = ready.get("ok") is True and self.worker_pid is not None and \
                os.getpgid(self.worker_pid) == self.worker_pid != os.getpgid(0)
        except OSError:
            self._own_group = False
        probe = ready.get("cuda_probe")
        if ready.get("ok") and probe is not None and not bool((probe == 7.0).all()):
            self.kill()
            ready = {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.WORKER_CRASHED,
                     "error": "a CUDA tensor shared by the worker arrived with other values (CUDA IPC)"}
        if ready.get("ok") and self.worker_pid is not None:
            self.boundary.observed = sandbox.observe(self.worker_pid)
            self.boundary.self_test = dict(ready.get("boundary") or {})
        return ready

    def pause(self) -> None:
        """Stop the worker's process group (SIGSTOP) while another candidate of the same run is
        evaluated: a worker that is not being judged runs nothing, so its threads can neither
        touch the files a rival is judged by nor signal the rival's worker (docs/gate.md, section 3,
        item 14).  ``request``, ``close`` and ``kill`` resume it."""
        if self._paused or not self._own_group or not self.alive:
            return
        try:
            os.killpg(self.worker_pid, signal.SIGSTOP)
            self._paused = True
        except OSError:
            pass

    def resume(self) -> None:
        if not self._paused:
            return
        self._paused = False
        try:
            os.killpg(self.worker_pid, signal.SIGCONT)
        except (OSError, AttributeError):
            pass

    def restart(self) -> Dict[str, Any]:
        self.restarts += 1
        return self.start()

    def close(self) -> None:
        self.resume()
        if self.proc is not None:
            if self.proc.is_alive() and self.conn is not None:
                try:
                    wire.send_frame(self.conn, {"op": "exit"}, 5.0)
                    self.proc.join(5)
                except Exception:
                    pass
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
            self._kill_group()   # descendants the worker left behind (a detached daemon)
        self.proc = None
        self._forget_boundary()
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None

    # -- messaging -------------------------------------------------------------------------
    def request(self, msg: Dict[str, Any], timeout_s: float, on_step=None) -> Dict[str, Any]:
        """Send one message and wait for its reply.  Messages with a ``step`` key that arrive
        before the reply are exchanges inside the op (the timing loop's spec requests and sample
        points): ``on_step(message)`` answers each.  ``host_op`` messages, sent by the worker's
        host-op recorder as each torch op runs, are tallied here into the reply's ``host_ops``
        ({"torch::op": [count, us, elements]}), which replaces whatever the worker put there:
        the record never waits in the worker, where the solution could edit it (``_tally_host_op``).
        Never raises for worker failures."""
        if not self.alive:
            return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.WORKER_CRASHED,
                    "error": "worker is not running\n" + self.log_tail()}
        self.resume()
        before = self._snapshot()
        started = time.perf_counter()
        try:
            wire.send_frame(self.conn, msg, timeout_s)   # never a blocking conn.send: case step_flood
        except wire.SendStalled as exc:
            self.kill()
            return {"ok": False, "status": "TIMEOUT", "reason": guards.TIMEOUT, "line": str(exc),
                    "error": f"{exc}\n" + self.log_tail()}
        except (OSError, EOFError, BrokenPipeError) as exc:
            return self._crashed(f"send failed: {exc}")
        host_ops: Dict[str, List[Any]] = {}
        reply = self._wait(timeout_s, on_step, host_ops)
        reply["host_ops"] = host_ops
        reply["parent_wall_s"] = time.perf_counter() - started
        reply.pop("files_changed", None)
        if before is not None:
            changed = guards.changed_files(before, self._snapshot())
            if changed:
                reply["files_changed"] = changed
        return reply

    def _snapshot(self) -> Optional[Dict[str, tuple]]:
        """The protected files, and the site-packages start-up files (guards.snapshot_startup_files)."""
        if not self.protect:
            return None
        return {**guards.snapshot_files(self.protect, self._logs, (self.log_dir,)), **guards.snapshot_startup_files()}

    def _wait(self, timeout_s: float, on_step, host_ops: Dict[str, List[Any]]) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        step_s = self.timeouts.step_s if on_step is not None else None
        idle_deadline = time.monotonic() + step_s if step_s else math.inf
        received = 0       # bytes of this request's messages (wire.MAX_REQUEST_BYTES)
        while True:
            now = time.monotonic()
            remaining = min(deadline, idle_deadline) - now
            if remaining <= 0:
                self.kill()
                if idle_deadline < deadline:
                    why = f"a call ran past the per-call limit of {step_s:g} s (--timeout)"
                else:
                    why = f"no reply within {timeout_s:g} s" + (" (--timeout)" if self.timeouts.step_s else "")
                return {"ok": False, "status": "TIMEOUT", "reason": guards.TIMEOUT, "line": why,
                        "error": why + "\n" + self.log_tail()}
            try:
                if self.conn.poll(min(remaining, 1.0)):
                    data = wire.recv_frame(self.conn)    # never conn.recv(): see gate/wire.py
                    received += len(data)
                    if received > wire.MAX_REQUEST_BYTES:
                        raise wire.ForbiddenGlobal(f"messages totalling more than {wire.MAX_REQUEST_BYTES} bytes "
                                                   f"in one request")
                    reply = wire.safe_loads(data, self._peer)
                    if not isinstance(reply, dict):
                        return self._crashed(f"bad reply: a {type(reply).__name__}, not a message")
                    if "host_op" in reply:
                        if not _tally_host_op(host_ops, reply):
                            self.kill()
                            return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.GATE_TAMPERED,
                                    "error": f"a host-op record the gate does not make: {_quote(reply)}"}
                        continue
                    if "step" in reply:
                        if on_step is None:
                            self.kill()
                            return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.GATE_TAMPERED,
                                    "error": f"an exchange step outside a timing op: {_quote(reply)}"}
                        # with a deadline: a worker that leaves the answers to its steps unread
                        # filled the pipe and blocked the parent here for ever (case step_flood)
                        wire.send_frame(self.conn, on_step(reply))
                        if step_s:
                            idle_deadline = time.monotonic() + step_s
                        continue
                    # CUDA buffers handed over as descriptors (gate/cuda_share.py, mode "fd")
                    return cuda_share.open_tree(reply, lambda df: wire.fetch_fd(df, self._peer))
            except wire.SendStalled as exc:
                self.kill()
                return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.GATE_TAMPERED,
                        "error": f"the worker left the answers to its exchange steps unread: {exc}\n" + self.log_tail()}
            except (wire.ForbiddenGlobal, cuda_share.UnexpectedDescriptors) as exc:
                self.kill()
                return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.GATE_TAMPERED,
                        "error": f"the worker sent a message the gate does not unpickle: {exc}\n" + self.log_tail()}
            except (EOFError, OSError, ConnectionResetError):
                return self._crashed("connection closed")
            except Exception as exc:  # unpicklable reply etc.
                return self._crashed(f"bad reply: {type(exc).__name__}: {exc}")
            if not self.proc.is_alive():
                return self._crashed("it exited")

    def _crashed(self, why: str) -> Dict[str, Any]:
        code = None
        if self.proc is not None:
            self.proc.join(2)            # a worker that died is gone at once; give its exit status a moment
            code = self.proc.exitcode
        self.kill()
        line = f"worker died ({why}; {describe_exit(code)})"
        return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.WORKER_CRASHED, "line": line,
                "error": line + "\n" + self.log_tail()}

    def kill(self) -> None:
        self.resume()
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self._kill_group()

    def _kill_group(self) -> None:
        """Kill what is left of the worker's process group (it calls ``os.setsid`` at start, so
        the group is its own: never the parent's)."""
        if self.proc is None or self.worker_pid is None or not self._own_group:
            return
        try:
            os.killpg(self.worker_pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def _forget_boundary(self) -> None:
        """After the worker ended: remove its scratch directory and free its uid."""
        b = self.boundary
        if b is None:
            return
        if b.scratch:
            import shutil

            shutil.rmtree(b.scratch, ignore_errors=True)
            b.scratch = None
        _LIVE_UIDS.discard(b.uid)

    def log_tail(self, limit: int = 8000) -> str:
        if not self._log_path or not os.path.exists(self._log_path):
            return ""
        with open(self._log_path, "rb") as fh:
            data = fh.read()
        return data[-limit:].decode(errors="replace")

    def new_log(self, limit: int = 20000) -> str:
        """Log output written since the last call of this method (capped)."""
        if not self._log_path or not os.path.exists(self._log_path):
            return ""
        with open(self._log_path, "rb") as fh:
            fh.seek(self._log_offset)
            data = fh.read()
        self._log_offset += len(data)
        return data[-limit:].decode(errors="replace")


def _quote(message: Any) -> str:
    """A refused message, quoted within bounds: ``str(m)[:200]`` builds the whole text first, and
    one shared 10 MB string referenced 1000 times made that 10 GB (helper-33's review)."""
    import reprlib

    quoter = reprlib.Repr()
    quoter.maxlevel, quoter.maxdict, quoter.maxlist, quoter.maxtuple = 3, 8, 8, 8
    quoter.maxstring, quoter.maxother = 80, 80
    return quoter.repr(message)[:200]


# the gate's host-op names are "torch::<op>" or "torch::python_function.<qualified name>"
MAX_HOST_OP_NAME = 1024
MAX_HOST_OP_NAMES = 10_000


def _tally_host_op(host_ops: Dict[str, List[Any]], message: Dict[str, Any]) -> bool:
    """Add one ``host_op`` message of the worker's host-op recorder ({"host_op": (name, us,
    elements)}, ``worker.HostOpRecorder``) to ``host_ops`` ({name: [count, us, elements]}).
    False for a message of any other shape or types, which the gate's recorder never sends."""
    record = message.get("host_op")
    if len(message) != 1 or type(record) is not tuple or len(record) != 3:
        return False
    name, us, elements = record
    if type(name) is not str or type(us) is not float or type(elements) is not int or elements < 0:
        return False
    # the tally lives until the reply: names of any length, each different, grew the parent until
    # the OOM killer ended it (case host_op_hoard)
    if len(name) > MAX_HOST_OP_NAME or (name not in host_ops and len(host_ops) >= MAX_HOST_OP_NAMES):
        return False
    agg = host_ops.setdefault(name, [0, 0.0, 0])
    agg[0] += 1
    agg[1] += us
    agg[2] += elements
    return True


def describe_exit(code: Optional[int]) -> str:
    """``exit code 3``, ``killed by signal 11 (SIGSEGV)``, or ``still running`` for a worker the
    gate had to kill (None)."""
    if code is None:
        return "still running: killed by the gate"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-code} ({name})"
    return f"exit code {code}"


def focus(sessions, current: "WorkerSession") -> None:
    """Before ``current`` is evaluated: pause every other session of the same run and resume
    ``current`` (``WorkerSession.pause``).  Only sessions used one at a time belong together (one
    bench run, one pool worker's GPU); never pass sessions that run concurrently."""
    for other in sessions:
        if other is not current:
            other.pause()
    current.resume()
