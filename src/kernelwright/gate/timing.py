"""The gate's clocks: nothing else in kernelwright times anything.

Three numbers per workload (each labelled in the trace):
  * latency: CUDA events around ONE call on the caller's stream, the device idle before the
    start event (so launch overhead counts), cold L2 (flushed before every iteration): what a
    caller waits for.  On CPU: a perf_counter span around the call.
  * graph latency: the same call captured once in a CUDA graph and replayed.
  * kernel time: CUPTI activity records of the call's kernels: the sum of their durations and
    the first-start-to-last-end span.  Tracing slows the host's launches, so the span of a
    multi-launch call is inflated; it is diagnosis, never the headline.

The functions here capture the torch/CUDA callables they use when this module is imported,
before any solution code runs in the process, so a solution that monkey-patches
``torch.cuda.Event``, ``torch.cuda.synchronize`` or ``time.perf_counter`` changes nothing.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, NamedTuple, Optional

import torch

_perf_counter = time.perf_counter
_HAS_CUDA_BUILD = hasattr(getattr(torch._C, "_CudaEventBase", None), "record")
if _HAS_CUDA_BUILD:
    _EventBase = torch._C._CudaEventBase
    _event_new = _EventBase.__new__
    _event_record = _EventBase.record
    _event_elapsed = _EventBase.elapsed_time
    _cuda_sync = torch._C._cuda_synchronize
    _current_stream = torch.cuda.current_stream
else:  # CPU-only torch build
    _EventBase = _event_new = _event_record = _event_elapsed = _cuda_sync = _current_stream = None


def _noop(*_args) -> None:
    return None


class Primitives(NamedTuple):
    """The clocks and event functions one worker uses, taken at import: C-level functions
    (``time.perf_counter``, ``cudaDeviceSynchronize``, the event type's own methods) that no
    Python patch can change in place.  ``stream`` is the harness's stream, fixed once (a solution
    that switches the current stream for good does not move the timer)."""

    now: Callable[[], float]
    sync: Callable[[], None]
    event_new: Optional[Callable]
    event_record: Optional[Callable]
    event_elapsed: Optional[Callable]
    stream: object


def primitives(device: torch.device) -> Primitives:
    if device.type == "cuda":
        return Primitives(_perf_counter, _cuda_sync, _event_new, _event_record, _event_elapsed,
                          torch.cuda.current_stream(device))
    return Primitives(_perf_counter, _noop, None, None, None, None)


def persisting_l2_limit() -> Optional[int]:
    """The device's persisting-L2 limit in bytes (cudaLimitPersistingL2CacheSize); None when it
    cannot be read (no CUDA, neither cuda-python nor libcudart found)."""
    try:
        from cuda.bindings import runtime as rt  # cuda-python

        err, value = rt.cudaDeviceGetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize)
        return int(value) if int(err) == 0 else None
    except Exception:
        pass
    lib = _cudart()
    if lib is None:
        return None
    import ctypes

    value = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(value), 0x06) != 0:  # cudaLimitPersistingL2CacheSize
        return None
    return int(value.value)


_CUDART = []


def _cudart():
    """The CUDA runtime library torch loaded (ctypes), or None."""
    if _CUDART:
        return _CUDART[0]
    lib = None
    try:
        import ctypes

        with open("/proc/self/maps") as fh:
            paths = sorted({line.split()[-1] for line in fh if "libcudart.so" in line})
        for path in paths + ["libcudart.so", "libcudart.so.12", "libcudart.so.13"]:
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError:
                continue
    except Exception:
        lib = None
    _CUDART.append(lib)
    return lib


def sync(device: torch.device) -> None:
    """Wait for every stream of the device (no-op on CPU)."""
    if device.type == "cuda":
        _cuda_sync()


def new_event() -> "torch._C._CudaEventBase":
    return _event_new(_EventBase, enable_timing=True)


def record(event) -> None:
    _event_record(event, _current_stream())


def elapsed_ms(start, end) -> float:
    return float(_event_elapsed(start, end))


def now_s() -> float:
    return _perf_counter()


class L2Flusher:
    """Evicts the L2 by zeroing a buffer of twice its size (flashinfer-bench's cold-L2 method),
    and resets persisting L2 lines and the persisting-L2 limit (a solution could otherwise pin
    its inputs in L2 through an access-policy window)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.buffer: Optional[torch.Tensor] = None
        self._reset_persisting: Optional[Callable[[], None]] = None
        if device.type == "cuda":
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20))
            self.buffer = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)
            self._reset_persisting = _persisting_l2_resetter()

    def flush(self) -> None:
        if self.buffer is not None:
            # Only touch the persisting-L2 state when something set it: changing the limit on
            # every iteration (even to the same 0) makes the driver reconfigure the L2 at the
            # next launch, which lands inside the measured call (seen on the H200: tens of µs).
            if self._reset_persisting is not None and persisting_l2_limit():
                self._reset_persisting()
            torch.Tensor.zero_(self.buffer)   # the class's method: an attribute set on the buffer is ignored


def _persisting_l2_resetter() -> Optional[Callable[[], None]]:
    try:
        from cuda.bindings import runtime as rt  # cuda-python

        reset = rt.cudaCtxResetPersistingL2Cache
        set_limit = rt.cudaDeviceSetLimit
        limit = rt.cudaLimit.cudaLimitPersistingL2CacheSize

        def _reset() -> None:
            set_limit(limit, 0)
            reset()
    except Exception:
        lib = _cudart()
        if lib is None:
            return None
        import ctypes

        lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        ctx_reset = lib.cudaCtxResetPersistingL2Cache
        dev_set_limit = lib.cudaDeviceSetLimit

        def _reset() -> None:
            dev_set_limit(0x06, 0)   # cudaLimitPersistingL2CacheSize
            ctx_reset()

    try:
        _reset()
    except Exception:
        return None
    return _reset


@dataclass
class KernelActivity:
    name: str
    start_ns: int
    end_ns: int
    stream: int

    @property
    def duration_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3


class CuptiKernelTracer:
    """Collects CUPTI kernel activity records (``cupti-python``) between ``begin()`` and
    ``end()``; kernels launched by other work are excluded by bracketing with device
    synchronisation and CUPTI timestamps.  ``available()`` is False without cupti or CUDA.

    CUPTI stays attached to the process after ``activity_disable``, and while attached every
    later launch costs more: on the H200 one graph replay 9.3 -> 10.8 µs and a six-node MoE graph
    +3 to +15 µs by events (``scripts/launch_overhead.py``, ``scripts/gate_loop_probe.py``).  The
    gate's headline clock runs in the same worker, so ``end()`` detaches CUPTI again
    (``cuptiFinalize``) when a self-test on first use shows that it can be attached again
    afterwards; otherwise it stays attached and ``detaches`` is False."""

    def __init__(self) -> None:
        self._records: List[KernelActivity] = []
        self._ok = False
        self._registered = False
        self.detaches = False
        try:
            from cupti import cupti  # type: ignore

            self._cupti = cupti
        except Exception:
            self._cupti = None
            return
        try:
            self._register()
            self._ok = True
        except Exception:
            self._ok = False
            return
        self.detaches = self._detach_works()

    def _register(self) -> None:
        if self._registered:
            return

        def requested():
            return 8 * 1024 * 1024, 0

        def completed(activities):
            for a in activities:
                if getattr(a, "kind", None) == self._cupti.ActivityKind.CONCURRENT_KERNEL:
                    self._records.append(KernelActivity(str(a.name), int(a.start), int(a.end),
                                                        int(getattr(a, "stream_id", 0))))

        self._cupti.activity_register_callbacks(requested, completed)
        self._registered = True

    def _detach_works(self) -> bool:
        """Trace one tiny kernel, detach, attach again and trace another: True when both
        windows saw their kernel (so detaching after each window loses nothing)."""
        try:
            x = torch.zeros(1, device="cuda")
            seen = []
            for _ in range(2):
                self.drain()
                self._register()
                self._cupti.activity_enable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
                x.add_(1)
                torch.cuda.synchronize()
                self._cupti.activity_flush_all(1)
                self._cupti.activity_disable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
                seen.append(len(self.drain()))
                self._cupti.finalize()
                self._registered = False
            self._register()
            return all(n >= 1 for n in seen)
        except Exception:
            try:
                self._register()
            except Exception:
                self._ok = False
            return False

    def available(self) -> bool:
        return self._ok

    def begin(self) -> None:
        self._register()
        self._cupti.activity_enable(self._cupti.ActivityKind.CONCURRENT_KERNEL)

    def end(self) -> None:
        self._cupti.activity_flush_all(1)
        self._cupti.activity_disable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
        if self.detaches:
            self._cupti.finalize()
            self._registered = False

    def timestamp(self) -> int:
        return int(self._cupti.get_timestamp())

    def drain(self) -> List[KernelActivity]:
        """Every record collected so far (and forget them)."""
        found, self._records = self._records, []
        return found


_TRACER: Optional[CuptiKernelTracer] = None


def cupti_tracer() -> CuptiKernelTracer:
    """The process's one CUPTI tracer (CUPTI callbacks are process-global)."""
    global _TRACER
    if _TRACER is None:
        _TRACER = CuptiKernelTracer()
    return _TRACER


@dataclass
class TimingSamples:
    """Raw per-iteration numbers from one timing phase (all in milliseconds)."""

    latency_ms: List[float] = field(default_factory=list)
    wall_ms: List[float] = field(default_factory=list)
    graph_latency_ms: List[float] = field(default_factory=list)
    graph_error: Optional[str] = None
    kernel_sum_ms: List[float] = field(default_factory=list)
    kernel_span_ms: List[float] = field(default_factory=list)
    kernels: Dict[str, List[float]] = field(default_factory=dict)  # name -> [count, total_us]
    empty_wall_ms: List[float] = field(default_factory=list)
    cupti_error: Optional[str] = None
    launches: Dict[str, List[float]] = field(default_factory=dict)   # CPU: Triton launches {name: [count, us]}
    host_ops: Dict[str, List[float]] = field(default_factory=dict)   # CPU: aten ops outside launches {op: [count, us, elements]}
    min_launches: Optional[int] = None   # CPU: fewest Triton launches in one timed call (None: not counted)


def median(values: List[float]) -> Optional[float]:
    return float(statistics.median(values)) if values else None
