"""The trusted side of one device: runs jobs with the gate's public functions.

A ``JobRunner`` lives in a pool worker process (local pool) or a Ray actor, one per GPU.  It
plays the role ``run_bench``'s process plays in a sequential run: it builds the
``WorkloadContext`` (inputs and reference outputs, computed here) and calls ``evaluate`` /
``time_only`` with a ``WorkerSession`` per candidate: each solution still runs in its own
spawned gate worker that never holds a reference output.  Sessions are kept between jobs
(a solution is built once per device, not once per workload), least recently used first out.

The runner yields events (plain dicts) as it goes; the pool streams them to the submitter.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from kernelwright import definitions

from kernelwright.gate.bench import Candidate
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate, time_only
from kernelwright.gate.session import Timeouts, WorkerSession, focus
from kernelwright.trace import Solution, Workload

from kernelwright.cluster.jobs import load_definition_ref

HEARTBEAT_S = 20.0


def _static_warnings(cand: Candidate) -> List[str]:
    """The advisory static-scan warnings the sequential runner attaches (same function)."""
    from kernelwright.gate.bench import static_warnings

    return static_warnings(cand)


class GpuLock:
    """An advisory per-GPU file lock (``flock``) held while a job runs, so that two pools, or a
    pool and another kernelwright run on the same host, never time on one GPU at once."""

    def __init__(self, key: Optional[str]):
        self.key = key
        self._fh = None

    def acquire(self) -> Iterator[Dict[str, Any]]:
        if not self.key:
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        folder = Path(tempfile.gettempdir()) / "kernelwright-gpu-locks"
        folder.mkdir(parents=True, exist_ok=True)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in self.key)
        self._fh = open(folder / f"{safe}.lock", "a+")
        last = 0.0
        while True:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() - last > HEARTBEAT_S:
                    last = time.monotonic()
                    yield {"op": "heartbeat", "why": f"waiting for the lock of GPU {self.key} (another run is timing on it)"}
                time.sleep(0.25)

    def release(self) -> None:
        if self._fh is not None:
            try:
                import fcntl

                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            except Exception:
                pass
            self._fh.close()
            self._fh = None


class JobRunner:
    def __init__(self, gate_device: str, worker: str, device_label: str, log_root: Optional[Path] = None,
                 max_sessions: int = 16, lock_key: Optional[str] = None):
        self.gate_device = gate_device
        self.worker = worker
        self.device_label = device_label
        self.log_root = Path(log_root) if log_root else None
        self.max_sessions = max(1, max_sessions)
        self.host = socket.gethostname()
        self.lock = GpuLock(lock_key)
        self._runs: "OrderedDict[tuple, SolutionRun]" = OrderedDict()

    # -- info ------------------------------------------------------------------------------
    def environment_json(self) -> str:
        from kernelwright.gate.environment import environment

        return environment(self.gate_device).model_dump_json()

    def loaded(self) -> List[str]:
        """Content hashes of the solutions this runner has a session for."""
        return [k[0] for k in self._runs]

    # -- sessions --------------------------------------------------------------------------
    def _run_for(self, cand: Dict[str, Any], timeouts: Optional[Timeouts], log_dir: Optional[Path],
                 data_files: Tuple[str, ...] = ()) -> SolutionRun:
        """The cached session of a candidate, or a new one.  ``data_files``: what the job's
        workload reads outside kernelwright (its definition JSON, safetensors blobs); behind the
        boundary a worker reads nothing else, so they are part of the key."""
        solution = Solution.model_validate_json(cand["solution"])
        digest = solution.content_hash()
        key = (digest, solution.name, cand["trusted"], cand["prepare"], cand["requires_kernel"],
               dataclasses.astuple(timeouts) if timeouts else None, str(log_dir), data_files)
        run = self._runs.get(key)
        if run is not None:
            self._runs.move_to_end(key)
            return run
        while len(self._runs) >= self.max_sessions:
            _, old = self._runs.popitem(last=False)
            old.session.close()
        root = log_dir or self.log_root or Path(tempfile.gettempdir()) / "kernelwright-pool-logs"
        folder = Path(root) / f"{self.worker.replace('/', '_')}-pid{os.getpid()}" / f"{solution.name}-{digest[:8]}"
        candidate = Candidate(solution, cand["label"], role=cand["role"], trusted=cand["trusted"],
                              prepare=cand["prepare"], requires_kernel=cand["requires_kernel"])
        session = WorkerSession(solution, self.gate_device, timeouts, trusted=cand["trusted"],
                                prepare=cand["prepare"], log_dir=folder, data_files=list(data_files),
                                results_dir=Path(log_dir).parent if log_dir else None)   # the run's folder (hidden)
        run = SolutionRun(session, requires_kernel=cand["requires_kernel"], label=cand["label"],
                          warnings=_static_warnings(candidate))
        self._runs[key] = run
        return run

    def close(self) -> None:
        """Stop every gate worker.  They are killed, not asked to exit: nothing of theirs is
        needed any more, and a graceful exit of each (one after the other) costs seconds."""
        runs = list(self._runs.values())
        self._runs.clear()
        for run in runs:
            try:
                run.session.kill()
                run.session.close()
            except Exception:
                pass
        self.lock.release()

    def kill_all(self) -> None:
        """Kill every gate worker now (the pool is going away)."""
        for run in list(self._runs.values()):
            try:
                run.session.kill()
            except Exception:
                pass

    # -- jobs ------------------------------------------------------------------------------
    def _config(self, wire: Dict[str, Any]) -> GateConfig:
        cfg = GateConfig(**wire["cfg"])
        want = "cuda" if cfg.device.startswith("cuda") else cfg.device
        have = "cuda" if self.gate_device.startswith("cuda") else self.gate_device
        if want != have:
            from kernelwright.cluster.jobs import JobError

            raise JobError(f"job wants device {cfg.device!r}, this worker owns {self.device_label} ({self.gate_device})")
        cfg.device = self.gate_device
        return cfg

    def run(self, wire: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        """Evaluate the job's candidates in order; yields ``started``/``trace``/``lower_bound``
        events, ``heartbeat`` while waiting for the GPU lock, and ``error`` if the trusted side
        failed; always ends with ``done``.  Its own loop, not ``gate.bench.evaluations``: one
        workload, and each candidate's session taken from the cache (``_run_for``, which may
        close the least recently used) only when its turn comes, after its ``started`` event."""
        started = time.perf_counter()
        stamp = {"device": self.device_label, "worker": self.worker, "host": self.host,
                 "job": wire["job_id"], "attempt": wire.get("attempt", 1)}
        if self.lock.key:
            stamp["gpu"] = self.lock.key          # the GPU's UUID where known: same id across backends
        try:
            yield from self.lock.acquire()
            builtin = load_definition_ref(wire["definition"])
            workload = Workload.model_validate_json(wire["workload"])
            cfg = self._config(wire)
            timeouts = Timeouts(**wire["timeouts"]) if wire.get("timeouts") else None
            log_dir = Path(wire["log_dir"]) if wire.get("log_dir") else None
            ctx = WorkloadContext(builtin, workload, cfg)
            files = tuple(definitions.data_files(builtin, [workload]))
            try:
                for cand in wire["candidates"]:
                    yield {"op": "started", "index": cand["index"], "label": cand["label"]}
                    run = self._run_for(cand, timeouts, log_dir, files)
                    focus([r.session for r in self._runs.values()], run.session)   # the others are stopped
                    if cand["role"] == "lower_bound":
                        ms = time_only(run, ctx)
                        yield {"op": "lower_bound", "index": cand["index"], "solution": run.session.solution.name,
                               "ms": ms, "cluster": stamp}
                    else:
                        trace = evaluate(run, ctx)
                        if trace.evaluation is not None and trace.evaluation.gate is not None:
                            trace.evaluation.gate.notes["cluster"] = dict(stamp)
                        yield {"op": "trace", "index": cand["index"], "trace": trace.model_dump_json()}
            finally:
                ctx.release()
        except Exception as exc:
            yield {"op": "error", "error": "".join(traceback.format_exception(exc))[-8000:]}
        finally:
            self.lock.release()
        yield {"op": "done", "seconds": time.perf_counter() - started}


def worker_info(runner: JobRunner, pid: Optional[int] = None) -> Dict[str, Any]:
    from kernelwright.cluster.devices import describe_gpu

    return {"pid": pid or os.getpid(), "host": runner.host, "device": runner.device_label,
            "gate_device": runner.gate_device, "environment": runner.environment_json(),
            "gpu": describe_gpu(runner.gate_device)}
