"""EvaluationPool: a queue of evaluation jobs served by one worker per GPU (local or Ray).

    with EvaluationPool(devices=["cuda:0", "cuda:1"]) as pool:
        fut = pool.submit(EvalJob(builtin, workload, [Candidate(sol, sol.name)], cfg))
        result = fut.result()            # JobResult: traces, lower bounds, attempts, devices
        pool.slots()                     # which device is busy with what

Each slot (device) has one dispatcher thread here and one long-lived worker there (a spawned
pool worker process, or a Ray actor); a worker runs ONE job at a time, so timing on a GPU is
never shared with another job.  Results stream back per candidate (``on_trace``).  A worker
that dies or stalls is replaced and its job retried once (only the candidates not yet
reported); if the retry dies too, the remaining candidates get RUNTIME_ERROR traces with
reason ``POOL_WORKER_CRASHED``.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

from kernelwright.cluster.devices import DeviceSpec, resolve_devices
from kernelwright.cluster.errors import ClusterUnavailable
from kernelwright.cluster.jobs import (
    POOL_WORKER_CRASHED, EvalJob, JobError, JobResult, definition_ref, failure_trace,
)
from kernelwright.cluster.local import LocalWorker, WorkerLost
from kernelwright.gate.session import Timeouts
from kernelwright.trace import Environment, Trace

TraceHook = Callable[[EvalJob, int, Trace], None]               # (job, candidate index, trace)
LowerBoundHook = Callable[[EvalJob, int, str, Optional[float]], None]  # (job, index, solution, ms)

MAX_ATTEMPTS = 2   # the first run and one retry


def _notice(message: str) -> None:
    print(f"kernelwright: {message}", file=sys.stderr, flush=True)


@dataclass
class SlotStatus:
    """A snapshot of one slot: which device, which worker, busy with what."""

    worker: str
    device: str
    backend: str
    state: str = "starting"           # starting | idle | busy | restarting | retired | closed
    pid: Optional[int] = None
    host: Optional[str] = None
    job_id: Optional[str] = None
    job: Optional[str] = None          # "<definition alias>/<workload uuid>"
    candidate: Optional[str] = None    # the candidate being evaluated now
    attempt: int = 0
    since: Optional[float] = None      # time.time() when the current state began
    jobs_done: int = 0
    restarts: int = 0
    note: str = ""


@dataclass
class _JobState:
    job: EvalJob
    future: Future
    on_trace: Optional[TraceHook]
    on_lower_bound: Optional[LowerBoundHook]
    hashes: Set[str]
    attempts: int = 0
    claimed: bool = False          # the future was set running
    bypassed: int = 0
    done: Set[int] = field(default_factory=set)
    traces: Dict[int, Trace] = field(default_factory=dict)
    lower_bounds: Dict[str, Optional[float]] = field(default_factory=dict)
    devices: List[str] = field(default_factory=list)
    crashes: List[str] = field(default_factory=list)
    error: Optional[str] = None
    current: Optional[str] = None
    started: Optional[float] = None


class _Slot:
    def __init__(self, index: int, handle, status: SlotStatus):
        self.index = index
        self.handle = handle
        self.status = status
        self.loaded: Set[str] = set()
        self.environment: Optional[Environment] = None
        self.thread: Optional[threading.Thread] = None
        self.start_failures = 0


_live_pools: "weakref.WeakSet[EvaluationPool]" = weakref.WeakSet()


@atexit.register
def _close_live_pools() -> None:  # pragma: no cover - interpreter exit
    for pool in list(_live_pools):
        try:
            pool.terminate()
        except Exception:
            pass


class EvaluationPool:
    """A pool of per-GPU evaluation workers.

    ``devices``: see ``devices.resolve_devices`` (local) or the number of GPU actors (Ray:
    an int, a list whose length is used, or None for every GPU of the Ray cluster).
    ``kind``: "cuda" or "cpu" (what the jobs' ``GateConfig.device`` is); default: cuda when a
    GPU is visible, else cpu.  ``backend="ray"`` without Ray installed falls back to the local
    pool with a one-line notice.  ``stall_timeout_s``: a worker that sends nothing for that
    long while it has a job is killed and the job retried (default: derived from the jobs'
    gate timeouts).
    """

    def __init__(self, devices: DeviceSpec = None, *, backend: str = "local", kind: Optional[str] = None,
                 ray_address: Optional[str] = None, max_sessions: int = 16, stall_timeout_s: Optional[float] = None,
                 start_timeout_s: float = 900.0, log_root: Optional[str] = None, affinity: bool = True,
                 ray_init_kwargs: Optional[Dict[str, Any]] = None, notice: Callable[[str], None] = _notice):
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
        self.notice = notice
        if kind is None:
            if isinstance(devices, (list, tuple)) and devices and all(str(d) == "cpu" for d in devices):
                kind = "cpu"
            else:
                from kernelwright.cluster.devices import cuda_device_count

                kind = "cuda" if cuda_device_count() > 0 else "cpu"
        self.kind = "cuda" if kind.startswith("cuda") else "cpu"
        if backend == "ray":
            from kernelwright.cluster.ray_backend import ray_available

            if not ray_available():
                notice("ray is not installed (pip install 'kernelwright[ray]'): using the local pool instead")
                backend = "local"
                if isinstance(devices, str) and devices.strip().isdigit():
                    devices = int(devices)
        self.backend = backend
        self.stall_timeout_s = stall_timeout_s
        self.affinity = affinity
        self._cond = threading.Condition()
        self._queue: "collections.deque[_JobState]" = collections.deque()
        self._closing = False
        self._terminated = False
        self._running = 0
        self._owns_ray = False
        self._slots: List[_Slot] = []
        if backend == "local":
            slots = resolve_devices(devices, self.kind)
            for i, slot in enumerate(slots):
                name = f"local-{i}"
                handle = LocalWorker(slot, name, max_sessions=max_sessions, log_root=log_root,
                                     start_timeout_s=start_timeout_s)
                self._slots.append(_Slot(i, handle, SlotStatus(worker=name, device=slot.label, backend="local",
                                                          since=time.time())))
        else:
            from kernelwright.cluster.ray_backend import init_ray

            self._owns_ray = init_ray(ray_address, **(ray_init_kwargs or {}))
            try:
                self._ray_slots(devices, max_sessions, start_timeout_s, notice)
            except BaseException:
                self._shutdown_ray()
                raise
        self._all_ready = threading.Event()
        self._ready_count = 0
        _live_pools.add(self)
        for s in self._slots:
            s.thread = threading.Thread(target=self._serve, args=(s,), name=f"kw-pool-{s.status.worker}", daemon=True)
            s.thread.start()

    # -- public API ------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self._slots)

    def submit(self, job: EvalJob, on_trace: Optional[TraceHook] = None,
               on_lower_bound: Optional[LowerBoundHook] = None) -> "Future[JobResult]":
        """Queue one job; the future resolves to its ``JobResult`` (or raises ``JobError`` when
        the trusted side failed, e.g. the reference raised).  ``on_trace`` is called (from a
        pool thread) as each candidate's trace arrives."""
        want = "cuda" if job.cfg.device.startswith("cuda") else job.cfg.device
        if want != self.kind:
            raise ValueError(f"job {job.label} is for device {job.cfg.device!r}, this pool runs on {self.kind}")
        definition_ref(job.builtin)    # fails now (ValueError) if the definition cannot travel
        st = _JobState(job, Future(), on_trace, on_lower_bound,
                       hashes={job.candidates[i].solution.content_hash() for i in job.active()})
        with self._cond:
            if self._closing:
                raise RuntimeError("the pool is closed")
            if self._slots and all(s.status.state == "retired" for s in self._slots):
                raise RuntimeError("no pool worker could be started: " + "; ".join(s.status.note for s in self._slots))
            if not job.active():
                st.future.set_running_or_notify_cancel()
                st.future.set_result(JobResult(job, attempts=0))
                return st.future
            self._queue.append(st)
            self._cond.notify_all()
        return st.future

    def slots(self) -> List[SlotStatus]:
        """Which device is doing what, now."""
        with self._cond:
            return [dataclasses.replace(s.status) for s in self._slots]

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def wait_ready(self, timeout: Optional[float] = None) -> bool:
        """Block until every worker has started (or been retired)."""
        return self._all_ready.wait(timeout)

    def close(self, wait: bool = True, cancel_pending: bool = False) -> None:
        """Stop taking jobs; with ``wait``, finish the queued ones first (unless
        ``cancel_pending``), then stop the workers."""
        with self._cond:
            self._closing = True
            if cancel_pending:
                while self._queue:
                    self._queue.popleft().future.cancel()
            self._cond.notify_all()
        if wait:
            for s in self._slots:
                if s.thread is not None:
                    s.thread.join()
        self._shutdown_ray()

    def terminate(self) -> None:
        """Kill every worker now; queued and running jobs fail."""
        with self._cond:
            self._closing = True
            self._terminated = True
            while self._queue:
                self._queue.popleft().future.cancel()
            self._cond.notify_all()
        for s in self._slots:
            try:
                s.handle.kill()
            except Exception:
                pass
        for s in self._slots:
            if s.thread is not None and s.thread is not threading.current_thread():
                s.thread.join(10)
        self._shutdown_ray()

    def __enter__(self) -> "EvaluationPool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()

    # -- internals -------------------------------------------------------------------------
    def _ray_slots(self, devices, max_sessions: int, start_timeout_s: float, notice) -> None:
        import os

        from kernelwright.cluster.ray_backend import RayWorker, cluster_gpus

        if isinstance(devices, str):
            devices = int(devices) if devices.strip().isdigit() else [d for d in devices.split(",") if d.strip()]
        available = cluster_gpus()
        n = available if devices is None else (devices if isinstance(devices, int) else len(devices))
        if n <= 0 or available <= 0:
            raise ClusterUnavailable("the Ray cluster has no GPU resources: start its nodes with GPUs (`ray start "
                                     "--num-gpus N`; on a CPU machine N fake GPUs test the plumbing)")
        if n > available:
            notice(f"{n} GPU actors requested, the Ray cluster has {available} GPUs: the rest wait for a GPU")
        env = {}
        if self.kind == "cpu" and os.environ.get("TRITON_INTERPRET"):
            env["TRITON_INTERPRET"] = os.environ["TRITON_INTERPRET"]
        for i in range(n):
            name = f"ray-{i}"
            handle = RayWorker(i, name, self.kind, env, max_sessions=max_sessions, start_timeout_s=start_timeout_s)
            self._slots.append(_Slot(i, handle, SlotStatus(worker=name, device=f"ray-gpu-slot{i}", backend="ray",
                                                      since=time.time())))

    def _shutdown_ray(self) -> None:
        if self._owns_ray:
            self._owns_ray = False
            try:
                import ray

                ray.shutdown()
            except Exception:
                pass

    def _set(self, s: _Slot, **changes) -> None:
        with self._cond:
            for k, v in changes.items():
                setattr(s.status, k, v)
            if "state" in changes:
                s.status.since = time.time()

    def _mark_ready(self) -> None:
        with self._cond:
            self._ready_count += 1
            if self._ready_count >= len(self._slots):
                self._all_ready.set()

    def _start(self, s: _Slot) -> bool:
        first = s.status.state == "starting"
        if not first:
            with self._cond:
                s.status.restarts += 1
        self._set(s, state="starting" if first else "restarting", pid=None)
        while True:
            try:
                info = s.handle.start()
            except WorkerLost as exc:
                s.start_failures += 1
                if s.start_failures >= MAX_ATTEMPTS or self._closing:
                    self._set(s, state="retired", note=str(exc))
                    self.notice(f"{s.status.worker} retired: {exc}")
                    self._retire_check()
                    if first:
                        self._mark_ready()
                    return False
                continue
            s.start_failures = 0
            try:
                s.environment = Environment.model_validate_json(info["environment"])
            except Exception:
                s.environment = None
            if info.get("version_warning"):
                self.notice(f"{s.status.worker}: {info['version_warning']}")
            self._set(s, state="idle", pid=info.get("pid"), host=info.get("host"),
                      device=info.get("device") or s.status.device, note="")
            if first:
                self._mark_ready()
            return True

    def _retire_check(self) -> None:
        with self._cond:
            if all(s.status.state == "retired" for s in self._slots):
                why = "; ".join(s.status.note for s in self._slots)
                while self._queue:
                    st = self._queue.popleft()
                    if not st.claimed and not st.future.set_running_or_notify_cancel():
                        continue   # cancelled
                    st.future.set_exception(RuntimeError(f"no pool worker could be started: {why}"))

    def _take(self, s: _Slot) -> Optional[_JobState]:
        with self._cond:
            while True:
                if self._terminated or (self._closing and not self._queue):
                    return None
                if self._queue:
                    st = self._pick(s)
                    if not st.claimed:
                        if not st.future.set_running_or_notify_cancel():
                            continue   # cancelled while queued
                        st.claimed = True
                    self._running += 1
                    return st
                self._cond.wait(1.0)

    def _pick(self, s: _Slot) -> _JobState:
        q = self._queue
        head = q[0]
        if head.attempts or not self.affinity or not s.loaded or head.hashes & s.loaded \
                or head.bypassed >= len(self._slots):
            return q.popleft()
        for i, st in enumerate(list(q)[1:4 * len(self._slots)], 1):
            if st.hashes & s.loaded:
                head.bypassed += 1
                del q[i]
                return st
        return q.popleft()

    def _stall_limit(self, job: EvalJob) -> float:
        if self.stall_timeout_s is not None:
            return self.stall_timeout_s
        t = job.timeouts or Timeouts()
        trials = job.cfg.trials
        calls = job.cfg.warmup + job.cfg.iterations + job.cfg.graph_iterations
        return t.start_s + t.load_s + t.alloc_s + (trials + 1) * t.call_s + trials * t.timing_op_s(calls) + 600.0

    def _serve(self, s: _Slot) -> None:
        try:
            while not self._terminated:
                if not s.handle.alive or s.status.state in ("starting", "restarting"):
                    if self._closing and not self._queue:
                        break
                    if not self._start(s):
                        return
                st = self._take(s)
                if st is None:
                    break
                if not s.handle.alive:
                    # the worker died while idle: not the job's fault, give it back untouched
                    with self._cond:
                        self._running -= 1
                        self._queue.appendleft(st)
                        self._cond.notify_all()
                    self._set(s, state="restarting")
                    continue
                try:
                    self._run(s, st)
                finally:
                    with self._cond:
                        self._running -= 1
        finally:
            if s.status.state != "retired":
                self._set(s, state="closed", job_id=None, job=None, candidate=None)
            try:
                s.handle.stop()
            except Exception:
                pass

    def _run(self, s: _Slot, st: _JobState) -> None:
        from kernelwright.cluster.jobs import job_wire

        job = st.job
        st.attempts += 1
        if st.started is None:
            st.started = time.perf_counter()
        st.devices.append(s.status.device)
        st.error = None
        st.current = None
        self._set(s, state="busy", job_id=job.job_id, job=job.label, candidate=None, attempt=st.attempts)

        def on_event(ev: Dict[str, Any]) -> None:
            op = ev.get("op")
            if op == "started":
                st.current = ev.get("label")
                self._set(s, candidate=st.current)
            elif op == "trace":
                trace = Trace.model_validate_json(ev["trace"])
                idx = ev["index"]
                st.traces[idx] = trace
                st.done.add(idx)
                self._hook(st.on_trace, job, idx, trace)
            elif op == "lower_bound":
                idx = ev["index"]
                st.lower_bounds[ev["solution"]] = ev["ms"]
                st.done.add(idx)
                self._hook(st.on_lower_bound, job, idx, ev["solution"], ev["ms"])
            elif op == "error":
                st.error = ev.get("error")
            elif op == "done":
                if ev.get("loaded") is not None:
                    s.loaded = set(ev["loaded"])

        try:
            s.handle.run(job_wire(job, skip=sorted(st.done), attempt=st.attempts), on_event, self._stall_limit(job))
        except WorkerLost as exc:
            try:
                s.handle.kill()     # idempotent: make sure nothing of the lost worker is left
            except Exception:
                pass
            s.loaded = set()
            self._set(s, state="restarting", candidate=None)
            what = f" while evaluating {st.current}" if st.current else ""
            st.crashes.append(f"attempt {st.attempts} on {s.status.device}: {exc}{what}")
            if self._terminated:
                st.future.set_exception(WorkerLost(f"pool terminated: {exc}"))
                return
            if st.attempts < MAX_ATTEMPTS:
                self.notice(f"{job.label}: {exc}{what}; retrying once on a fresh worker")
                with self._cond:
                    self._queue.appendleft(st)
                    self._cond.notify_all()
                return
            self.notice(f"{job.label}: {exc}{what}; second loss, remaining candidates recorded as RUNTIME_ERROR")
            log = ("the trusted pool worker evaluating this job died twice (the job was retried once on a "
                   "fresh worker):\n" + "\n".join(st.crashes))
            for idx in job.active():
                if idx in st.done:
                    continue
                cand = job.candidates[idx]
                if cand.role == "lower_bound":
                    st.lower_bounds[cand.solution.name] = None
                    self._hook(st.on_lower_bound, job, idx, cand.solution.name, None)
                else:
                    trace = failure_trace(job, idx, POOL_WORKER_CRASHED, log, s.environment, s.status.device)
                    st.traces[idx] = trace
                    self._hook(st.on_trace, job, idx, trace)
                st.done.add(idx)
            self._finish(s, st)
            return
        self._finish(s, st)

    def _finish(self, s: _Slot, st: _JobState) -> None:
        job = st.job
        result = JobResult(job, traces=[st.traces[i] for i in sorted(st.traces)], lower_bounds=dict(st.lower_bounds),
                           attempts=st.attempts, devices=list(st.devices),
                           seconds=time.perf_counter() - (st.started or time.perf_counter()), crashes=list(st.crashes))
        with self._cond:
            s.status.jobs_done += 1
        if s.status.state == "busy":
            self._set(s, state="idle", job_id=None, job=None, candidate=None)
        if st.error:
            err = JobError(f"{job.label} failed on the trusted side:\n{st.error}")
            err.result = result
            st.future.set_exception(err)
        else:
            st.future.set_result(result)

    def _hook(self, fn, *args) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as exc:  # a callback's bug must not kill the dispatcher
            self.notice(f"callback {getattr(fn, '__name__', fn)} raised {type(exc).__name__}: {exc}")
