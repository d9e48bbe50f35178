"""The gate's clocks: nothing else in kernelwright times anything.

Four numbers per workload (each labelled in the trace):
  * device time (the headline, ``latency_ms``): one call's GPU time with the host launch hidden
    and every GPU gap inside the call counted.  After the L2 flush the harness's stream is held
    by a blocking kernel (``StreamHold``: CTAs filling every SM, spinning on a flag in mapped host
    memory -- NVBench's blocking-kernel method), the start event, the call and the end event are
    enqueued behind it, and only then does the host release the hold.  The spin has a time limit:
    a call that waits for the device while the stream is held (``.item()``, a synchronise) runs
    on after the limit, and that iteration is labelled and measured as eager instead.
  * eager latency: CUDA events around one call with the device idle before the start event, so
    the host's launch path counts (what a caller waits for in eager PyTorch).  Measured on every
    other timed iteration, interleaved with the held ones.
  * graph latency: the same call captured once in a CUDA graph and replayed behind the hold.
  * kernel time: CUPTI activity records of the call's kernels: the sum of their durations and
    the first-start-to-last-end span (FlashInfer-Bench's timer); CUPTI also reports the call's
    device-to-host copies.  Tracing slows the host's launches, so the span of a multi-launch call
    is inflated; it is diagnosis and a cross-check, never the headline.
On CPU there is one clock: a perf_counter span around the call.

The functions here capture the torch/CUDA callables they use when this module is imported,
before any solution code runs in the process, so a solution that monkey-patches
``torch.cuda.Event``, ``torch.cuda.synchronize`` or ``time.perf_counter`` changes nothing.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

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
    # the C functions behind torch.cuda.set_stream / current_stream (no Python patch reaches them)
    _set_stream_raw = getattr(torch._C, "_cuda_setStream", None)
    _get_stream_raw = getattr(torch._C, "_cuda_getCurrentStream", None)
else:  # CPU-only torch build
    _EventBase = _event_new = _event_record = _event_elapsed = _cuda_sync = _current_stream = None
    _set_stream_raw = _get_stream_raw = None


def _noop(*_args) -> None:
    return None


class Primitives(NamedTuple):
    """The clocks and event functions one worker uses, taken at import: C-level functions
    (``time.perf_counter``, ``cudaDeviceSynchronize``, the event type's own methods) that no
    Python patch can change in place.  ``stream`` is the harness's stream, fixed once: every call
    of the solution starts with it as the current stream and must end with it
    (``StreamPin``), so the events on it see all the work the call joins to its caller."""

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


class StreamPin:
    """Makes a stream the current one and says whether it still is, through torch's C functions.

    A call that leaves another stream current has put its work where the harness's events do
    not look: a solution's ``torch.cuda.current_stream().wait_stream(side)`` joins whatever
    stream is current, so the harness pins its own before every call and checks it after
    (red-team case ``held_side_stream``: a current stream left switched by a failed graph capture
    made the join miss the events and halved the headline).  On the CPU both are no-ops."""

    def __init__(self, stream: Optional[object]):
        self.stream = stream

    def select(self, stream: Optional[object] = None) -> None:
        """Make ``stream`` (default: the pinned one) the current stream of its device."""
        target = self.stream if stream is None else stream
        if target is not None and _set_stream_raw is not None:
            _set_stream_raw(stream_id=target.stream_id, device_index=target.device_index,
                            device_type=target.device_type)

    def holds(self, stream: Optional[object] = None) -> bool:
        """Whether ``stream`` (default: the pinned one) is its device's current stream."""
        target = self.stream if stream is None else stream
        if target is None or _get_stream_raw is None:
            return True
        return tuple(_get_stream_raw(target.device_index)) == (target.stream_id, target.device_index,
                                                              target.device_type)


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


def eager_event_ms(fn: Callable[[], object]) -> float:
    """Milliseconds between CUDA events recorded on the current stream around one ``fn()``, the
    device synchronised after it: the eager span (the host's launch path counts), no L2 flush and
    no stream hold.  For calibration and diagnosis; solutions are timed by the harness."""
    start, end = new_event(), new_event()
    record(start)
    fn()
    record(end)
    _cuda_sync()
    return elapsed_ms(start, end)


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


# -- the device-time clock: a blocking kernel holds the stream while the call is enqueued ----------

HOLD_LIMIT_S = 0.05
"""How long the blocking kernel waits for the host's release before it lets the stream run on
(seconds).  Far above any honest call's host path (tens of µs to a few ms), far below the gate's
per-call timeout."""

HOLD_KERNEL_NAME = "kw_stream_hold"   # CUPTI records of the hold itself are not the solution's

HOLD_MAX_CLOCK_HZ = 2.0e9
"""The cycle budget of the time limit assumes an SM clock of at most this (H100/H200 boost: 1.98 GHz):
at a lower clock the limit lasts longer, never shorter."""

HOLD_RELEASED, HOLD_TIMED_OUT, HOLD_UNKNOWN = "released", "timed_out", "unknown"
HOLD_NOT_RESIDENT = "not_resident"   # begin() did not see every CTA resident: the hold proves nothing

HOLD_RESIDENT_WAIT_S = 0.005
"""How long ``StreamHold.begin`` waits (host wall clock) for every CTA of the blocking kernel to be
resident before the call is enqueued.  A CTA still waiting for an SM when the call's kernels are
launched would let them start beside the hold, and would itself end the hold late, after the
release: the start event would then miss their work."""

HOLD_EXIT_SPREAD_NS = 3_000
"""How long the blocking kernel's CTAs take to leave after the release: CTA 0 sees the host's
flag and sets the device-memory gate, the others poll it every 200 ns.  A kernel on another
stream may start on the first SM that frees up, so CUPTI can show it starting up to this much
before the hold's end (its last CTA) without any work having run during the hold."""

_HOLD_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024) kw_stream_hold(
        const volatile int* release, volatile int* gate, int epoch, unsigned long long limit_ns,
        unsigned long long limit_cycles, volatile int* status, unsigned int* arrivals, volatile int* resident) {
    // Every SM gets CTAs of this kernel until its warp slots and its shared memory are used up
    // (the launch sizes both): while the hold lasts no CTA of any other kernel, on any stream, can
    // be resident anywhere on the device.  Thread 0 of each CTA waits; the others wait at the
    // barrier, so every warp stays resident until the release.  The last CTA to arrive tells the
    // host (mapped memory) that all of them are resident: only then does the host enqueue the call.
    extern __shared__ unsigned char fill[];
    if (threadIdx.x == 0) {
        if (atomicAdd(arrivals, 1u) % gridDim.x == gridDim.x - 1) {   // cumulative: one launch at a time
            *resident = epoch;
            __threadfence_system();
        }
        // The time limit needs both the globaltimer (ns) and the SM's cycle counter past their
        // limits: a virtualised globaltimer that runs fast cannot end a hold early.
        unsigned long long t0, now, c0 = clock64(), c = c0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        now = t0;
        if (blockIdx.x == 0) {
            int how = 1;                               // 1: released by the host, 2: timed out
            while (*release != epoch) {
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
                c = clock64();
                if (now - t0 > limit_ns && c - c0 > limit_cycles) { how = 2; break; }
                __nanosleep(500);
            }
            *gate = epoch;                             // the other CTAs poll device memory, not PCIe
            status[1] = how;
            status[2] = (int)((now - t0) / 1000);      // how long it held: globaltimer µs
            status[3] = (int)((c - c0) / 1000);        // ... and SM kilo-cycles
            __threadfence_system();
            status[0] = epoch;
        } else {
            while (*gate != epoch) {
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
                c = clock64();
                if (now - t0 > 2 * limit_ns && c - c0 > 2 * limit_cycles) break;
                __nanosleep(200);
            }
        }
        fill[0] = 0;
    }
    __syncthreads();
}
"""


def _compile_hold_kernel(nvrtc, arch: bytes) -> bytes:
    """``_HOLD_SOURCE`` compiled by NVRTC for ``arch`` (``--gpu-architecture=sm_XY``): the cubin.
    Raises RuntimeError with the start of NVRTC's log when it does not compile."""
    err, prog = nvrtc.nvrtcCreateProgram(_HOLD_SOURCE.encode(), b"kw_stream_hold.cu", 0, [], [])
    _check(err, "nvrtcCreateProgram")
    (err,) = nvrtc.nvrtcCompileProgram(prog, 1, [arch])
    if int(err) != 0:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed to compile the hold kernel: {log.decode(errors='replace')[:300]}")
    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    _check(err, "nvrtcGetCUBINSize")
    cubin = b" " * size
    _check(nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
    return cubin


class StreamHold:
    """NVBench-style blocking kernel for the device-time clock (CUDA, cuda-python's driver and
    NVRTC bindings).

    ``begin(stream)`` enqueues ``kw_stream_hold`` on ``stream`` (CTAs that take every warp slot
    and all the shared memory of every SM, so nothing else can be resident meanwhile) and returns
    an epoch; ``release(epoch)`` stores the epoch into mapped host memory, which ends the kernel;
    after a device synchronise, ``outcome(epoch)`` says whether the host released it
    (``HOLD_RELEASED``) or its time limit ran out first (``HOLD_TIMED_OUT``: the call waited for
    the device while the stream was held, so its events do not measure device time).

    ``create(device)`` returns None (and ``why_not(device)`` the reason) where it cannot be
    built: no CUDA, no cuda-python, NVRTC failing.  Every driver function is bound when the object
    is made, before any solution code runs in the process."""

    def __init__(self, device: torch.device, limit_s: float = HOLD_LIMIT_S):
        import ctypes

        from cuda.bindings import driver as cu
        from cuda.bindings import nvrtc

        props = torch.cuda.get_device_properties(device)
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)                       # the primary context is current
        cubin = _compile_hold_kernel(nvrtc, f"--gpu-architecture=sm_{props.major}{props.minor}".encode())
        err, self._module = cu.cuModuleLoadData(cubin)
        _check(err, "cuModuleLoadData")
        err, self._function = cu.cuModuleGetFunction(self._module, b"kw_stream_hold")
        _check(err, "cuModuleGetFunction")
        dev = cu.CUdevice(torch.cuda.current_device() if device.index is None else device.index)

        def attribute(name: str) -> int:
            err, value = cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, name), dev)
            _check(err, f"cuDeviceGetAttribute({name})")
            return int(value)

        # fill every SM: as many 1024-thread CTAs as its warp slots take (H100/H200: 2), each with
        # its share of the SM's shared memory less the per-block reservation
        self.threads = 1024
        self.ctas_per_sm = max(1, attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR") // self.threads)
        per_sm = attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")
        reserved = attribute("CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK")
        optin = attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        self.shared_bytes = min(optin, per_sm // self.ctas_per_sm - reserved)
        _check(cu.cuFuncSetAttribute(self._function,
                                     cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     self.shared_bytes)[0], "cuFuncSetAttribute")
        # the largest shared-memory carve-out, so that ctas_per_sm CTAs of that size fit on an SM
        _check(cu.cuFuncSetAttribute(self._function,
                                     cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                     100)[0], "cuFuncSetAttribute(carveout)")
        self.ctas = int(props.multi_processor_count) * self.ctas_per_sm
        err, self._host = cu.cuMemHostAlloc(64, 0x01 | 0x02)   # CU_MEMHOSTALLOC_PORTABLE | _DEVICEMAP
        _check(err, "cuMemHostAlloc")
        err, self._host_dev = cu.cuMemHostGetDevicePointer(self._host, 0)
        _check(err, "cuMemHostGetDevicePointer")
        self._gate = torch.zeros(4, dtype=torch.int32, device=device)    # the other CTAs' flag
        base = int(self._host)
        self._release_cell = ctypes.c_int32.from_address(base)
        self._status_epoch = ctypes.c_int32.from_address(base + 4)
        self._status_how = ctypes.c_int32.from_address(base + 8)
        self._status_held_us = ctypes.c_int32.from_address(base + 12)
        self._status_held_kcycles = ctypes.c_int32.from_address(base + 16)
        self._resident_cell = ctypes.c_int32.from_address(base + 20)
        self._resident_cell.value = 0
        self._not_resident: set = set()
        self._release_cell.value = 0
        self._status_epoch.value = 0
        self._status_how.value = 0
        self._launch = cu.cuLaunchKernel
        self._stream_type = cu.CUstream
        self._types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulonglong,
                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self._release_ptr = int(self._host_dev)
        self._status_ptr = int(self._host_dev) + 4
        self._gate_ptr = int(self._gate.data_ptr())
        self._arrivals_ptr = self._gate_ptr + 4          # _gate[1]: CTAs arrived, over all launches
        self._resident_ptr = int(self._host_dev) + 20
        self._clock = time.perf_counter
        self.limit_ns = int(limit_s * 1e9)
        self.limit_cycles = int(limit_s * HOLD_MAX_CLOCK_HZ)
        self.epoch = 0
        self.kind = (f"blocking kernel ({self.ctas_per_sm} CTAs x {self.threads} threads on every SM, "
                     "spinning on mapped host memory)")

    @staticmethod
    def create(device: torch.device, limit_s: float = HOLD_LIMIT_S) -> "Optional[StreamHold]":
        """A StreamHold for ``device``, or None where it cannot be built (see ``why_not``)."""
        if device.type != "cuda":
            return None
        key = str(device)
        if key not in _HOLDS:
            try:
                hold = StreamHold(device, limit_s)
                hold.self_test(torch.cuda.current_stream(device))
                _HOLDS[key] = hold
            except Exception as exc:   # no cuda-python, NVRTC or driver trouble: say why, time eagerly
                _HOLDS[key] = None
                _HOLD_ERRORS[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return _HOLDS[key]

    @staticmethod
    def why_not(device: torch.device) -> Optional[str]:
        """Why ``create(device)`` gave None (None when it did not)."""
        if device.type != "cuda":
            return "no CUDA device"
        return _HOLD_ERRORS.get(str(device))

    def self_test(self, stream) -> None:
        """Hold ``stream``, release it at once, and check that the kernel saw the release.
        Raises RuntimeError otherwise (``create`` then gives None: no device-time clock)."""
        epoch = self.begin(stream)
        self.release(epoch)
        torch.cuda.synchronize()
        how = self.outcome(epoch)
        if how != HOLD_RELEASED:
            raise RuntimeError(f"the hold kernel's self-test ended {how}, not {HOLD_RELEASED}")

    def begin(self, stream, resident_wait_s: float = HOLD_RESIDENT_WAIT_S) -> int:
        """Enqueue the blocking kernel on ``stream`` (a torch.cuda.Stream) and wait (at most
        ``resident_wait_s`` of host time) until every CTA of it is resident; the next epoch.  When
        they are not all resident by then, ``outcome`` of that epoch is ``HOLD_NOT_RESIDENT``."""
        self.epoch += 1
        epoch = self.epoch
        args = (self._release_ptr, self._gate_ptr, epoch, self.limit_ns, self.limit_cycles, self._status_ptr,
                self._arrivals_ptr, self._resident_ptr)
        (err,) = self._launch(self._function, self.ctas, 1, 1, self.threads, 1, 1, self.shared_bytes,
                              self._stream_type(stream.cuda_stream), (args, self._types), 0)
        if int(err) != 0:
            raise RuntimeError(f"cuLaunchKernel of the hold kernel failed: {err}")
        cell, now = self._resident_cell, self._clock
        deadline = now() + resident_wait_s
        while cell.value != epoch:
            if now() > deadline:
                self._not_resident.add(epoch)
                break
        return epoch

    def release(self, epoch: int) -> None:
        """Let the held stream run (a plain store into mapped host memory: no CUDA call)."""
        self._release_cell.value = epoch

    def held(self, epoch: int) -> Optional[Tuple[int, int]]:
        """After a device synchronise: how long the hold of ``epoch`` lasted, (globaltimer µs, SM
        kilo-cycles), or None when its status is not that epoch's."""
        if self._status_epoch.value != epoch:
            return None
        return self._status_held_us.value, self._status_held_kcycles.value

    def outcome(self, epoch: int) -> str:
        """After a device synchronise: how the hold of ``epoch`` ended (``HOLD_NOT_RESIDENT``
        when ``begin`` did not see all its CTAs resident)."""
        if epoch in self._not_resident:
            return HOLD_NOT_RESIDENT
        if self._status_epoch.value != epoch:
            return HOLD_UNKNOWN
        return HOLD_RELEASED if self._status_how.value == 1 else HOLD_TIMED_OUT


_HOLDS: Dict[str, Optional[StreamHold]] = {}
_HOLD_ERRORS: Dict[str, str] = {}


def _check(err, what: str) -> None:
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")


class HoldPolicy:
    """Which timed iterations hold the stream, and when to stop trying.

    The first half of a loop of ``count`` iterations past the warm-up is held (device time; the
    warm-up iterations before it too), the second half runs with the device idle (eager latency),
    so both clocks see the same kind of inputs in the same trial, and the held calls, all traced by
    CUPTI where it is available, run before the tracer detaches (an attached CUPTI slows every
    launch, which the eager clock would count).  A held iteration whose hold timed out is lost to
    device time (its events measured an idle device part of the way); after ``max_timeouts`` such
    iterations past the warm-up, every later iteration runs idle, so a call that always waits for
    the device costs ``max_timeouts`` time limits, not one per iteration.  Warm-up time-outs do not
    count: a first call may capture a graph (which synchronises)."""

    def __init__(self, available: bool, warmup: int, count: int, max_timeouts: int = 2):
        self.available = available
        self.warmup = warmup
        self.split = warmup + (max(0, count - warmup) + 1) // 2   # the first idle iteration
        self.max_timeouts = max_timeouts
        self.timeouts = 0          # held iterations past the warm-up that timed out
        self.warmup_timeouts = 0
        self.off = not available

    def holds(self, i: int) -> bool:
        """Whether iteration ``i`` is held."""
        return not self.off and i < self.split

    def note(self, i: int, outcome: str) -> bool:
        """Record how the hold of iteration ``i`` ended; True when its events are device time."""
        if outcome == HOLD_RELEASED:
            return True
        if i < self.warmup:
            self.warmup_timeouts += 1
        else:
            self.timeouts += 1
            if self.timeouts >= self.max_timeouts:
                self.off = True
        return False



def device_time_ms(fn: Callable[[], object], device: torch.device, iterations: int = 30,
                   warmup: int = 3) -> Optional[float]:
    """Median device time (ms) of ``fn()`` by the gate's held-stream clock, for the gate's own
    calibration (one trivial kernel: the launch term of the roofline floor).  Warm L2, no fresh
    inputs: not for timing solutions.  None off CUDA, without a StreamHold, or when every hold
    timed out (``fn`` waits for the device)."""
    hold = StreamHold.create(device)
    if hold is None:
        return None
    stream = torch.cuda.current_stream(device)
    times = []
    for i in range(warmup + iterations):
        _cuda_sync()
        start, end = new_event(), new_event()
        epoch = hold.begin(stream)
        _event_record(start, stream)
        fn()
        _event_record(end, stream)
        hold.release(epoch)
        _cuda_sync()
        if i >= warmup and hold.outcome(epoch) == HOLD_RELEASED:
            times.append(elapsed_ms(start, end))
    return float(statistics.median(times)) if times else None

def device_clock_label(clock: str, hold_kind: Optional[str] = None) -> str:
    """The trace's ``timing_method`` for a headline taken on ``clock`` ("device", "eager", "cpu")."""
    if clock == "device":
        return (f"device time: stream held by a {hold_kind or 'blocking kernel'} while the call is enqueued, "
                "then CUDA events around the call (host launch excluded, GPU gaps inside the call included); "
                "cold L2, fresh inputs per iteration, median/trial, mean over trials")
    if clock == "cpu":
        return "perf_counter (CPU), median/trial, mean over trials"
    return ("eager latency: CUDA events around one call with the device idle before the start event "
            "(host launch included); cold L2, fresh inputs per iteration, median/trial, mean over trials")


class KernelActivity(NamedTuple):
    """One kernel seen by CUPTI (immutable: a record the solution reaches cannot be edited in place)."""

    name: str
    start_ns: int
    end_ns: int
    stream: int

    @property
    def duration_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3


class CopyActivity(NamedTuple):
    """One memory copy or memset seen by CUPTI: ``device_to_host`` when its copy kind is DTOH.
    A copy engine needs no SM, so the blocking kernel does not keep it from running a copy from a
    stream that does not wait for the held one (red-team case ``host_compute_held``).  Immutable,
    like ``KernelActivity``."""

    device_to_host: bool
    bytes: int
    start_ns: int
    end_ns: int = 0
    memset: bool = False


def held_prerelease(starts_ns: List[int], released_ns: int, spread_ns: int = 0) -> Tuple[int, float]:
    """(how many of a held call's activities (kernels, or copies and memsets) started more than
    ``spread_ns`` before the hold ended at ``released_ns``, the largest lead of any of them in µs
    (0 when none started before the release)).  CUPTI timestamps in ns."""
    early = sum(1 for t in starts_ns if t < released_ns - spread_ns)
    lead = max(0.0, (released_ns - min(starts_ns)) / 1e3) if starts_ns else 0.0
    return early, lead


_CUPTI_DTOH = 2   # CUpti_ActivityMemcpyKind: CUPTI_ACTIVITY_MEMCPY_KIND_DTOH


class CuptiKernelTracer:
    """Collects CUPTI kernel activity records (``cupti-python``) between ``begin()`` and
    ``end()``; kernels launched by other work are excluded by bracketing with device
    synchronisation and CUPTI timestamps.  ``available()`` is False without cupti or CUDA.

    CUPTI stays attached to the process after ``activity_disable``, and while attached every
    later launch costs more: on the H200 one graph replay 9.3 -> 10.8 µs and a six-node MoE graph
    +3 to +15 µs by events (``scripts/launch_overhead.py``, ``scripts/gate_loop_probe.py``).  The
    gate's headline clock runs in the same worker, so ``end()`` detaches CUPTI again
    (``cuptiFinalize``) when a self-test on first use shows that it can be attached again
    afterwards; otherwise it stays attached and ``detaches`` is False.

    The worker makes its tracer before any solution code runs (``Harness.tracer``, watched by the
    integrity snapshot: rebinding any attribute but the three flags ``begin``/``end`` move is
    GATE_TAMPERED); the records go into lists only the buffer callback fills (``_record_store``),
    read by ``take``, which reports a list rebound or edited in place."""

    def __init__(self) -> None:
        (self._records, self._copies), self._add, self._take = _record_store()
        self.traces_copies = False      # MEMCPY records are collected too (device-to-host copies)
        self.traces_memsets = False     # and MEMSET records
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

        kernel = self._cupti.ActivityKind.CONCURRENT_KERNEL
        memcpy = getattr(self._cupti.ActivityKind, "MEMCPY", None)
        memset = getattr(self._cupti.ActivityKind, "MEMSET", None)
        add = self._add   # bound now: the callback never looks the tracer's lists up again

        def completed(activities):
            for a in activities:
                kind = getattr(a, "kind", None)
                if kind == kernel:
                    add(0, KernelActivity(str(a.name), int(a.start), int(a.end), int(getattr(a, "stream_id", 0))))
                elif memcpy is not None and kind == memcpy:
                    copy_kind = int(getattr(a, "copy_kind", getattr(a, "copyKind", -1)))
                    add(1, CopyActivity(copy_kind == _CUPTI_DTOH, int(getattr(a, "bytes", 0)),
                                        int(getattr(a, "start", 0)), int(getattr(a, "end", 0))))
                elif memset is not None and kind == memset:
                    add(1, CopyActivity(False, int(getattr(a, "bytes", 0)), int(getattr(a, "start", 0)),
                                        int(getattr(a, "end", 0)), memset=True))

        self._cupti.activity_register_callbacks(requested, completed)
        self._registered = True

    def _detach_works(self) -> bool:
        """Trace one tiny kernel, detach, attach again and trace another: True when both
        windows saw their kernel (so detaching after each window loses nothing); the tracer is
        then left detached (the first ``begin`` attaches it), so a worker whose gate never traces
        pays nothing for it."""
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
            if all(n >= 1 for n in seen):
                return True
            self._register()
            return False
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
        memcpy = getattr(self._cupti.ActivityKind, "MEMCPY", None)
        memset = getattr(self._cupti.ActivityKind, "MEMSET", None)
        try:
            if memcpy is not None:
                self._cupti.activity_enable(memcpy)
                self.traces_copies = True
        except Exception:
            self.traces_copies = False
        self.traces_memsets = False
        try:
            if memset is not None:
                self._cupti.activity_enable(memset)
                self.traces_memsets = True
        except Exception:
            pass

    def end(self) -> None:
        self._cupti.activity_flush_all(1)
        self._cupti.activity_disable(self._cupti.ActivityKind.CONCURRENT_KERNEL)
        for traced, name in ((self.traces_copies, "MEMCPY"), (self.traces_memsets, "MEMSET")):
            if traced:
                try:
                    self._cupti.activity_disable(getattr(self._cupti.ActivityKind, name))
                except Exception:
                    pass
        if self.detaches:
            self._cupti.finalize()
            self._registered = False

    def timestamp(self) -> int:
        return int(self._cupti.get_timestamp())

    def take(self) -> Tuple[List[KernelActivity], List[CopyActivity], List[str]]:
        """Every kernel record and every copy/memset record collected so far (and forget them),
        with what the record store found wrong with its lists (``_record_store``: a list
        rebound on the tracer, or edited in place): the gate's reading (``HeldTracing``)."""
        kernels, kernels_problem = self._take(0, self._records)
        copies, copies_problem = self._take(1, self._copies)
        return kernels, copies, [p for p in (kernels_problem, copies_problem) if p]

    def drain(self) -> List[KernelActivity]:
        """Every kernel record collected so far (and forget them); the self-test's, the GPU
        tests' and the experiments' reading (the gate reads through ``take``)."""
        return self._take(0, self._records)[0]

    def drain_copies(self) -> List[CopyActivity]:
        """Every copy/memset record collected so far (and forget them); as ``drain``."""
        return self._take(1, self._copies)[0]


def _record_store():
    """The CUPTI tracer's two record lists (kernels; copies and memsets) and the two functions
    over them: ``add(which, record)``, which the buffer callback calls (bound when it is
    registered), and ``take(which, seen)``, which returns that list's records and empties it in
    place.  The lists are made once and never rebound, so ``take`` can tell (its message, else
    None) when ``seen`` (the tracer's attribute read now) is no longer the list it fills
    (rebound, e.g. to a list subclass whose ``append`` drops records: case
    ``tracer_drop_records``) or when the list holds another number of records than were
    delivered into it (records taken out or put in after a flush the solution forced); the
    records themselves are immutable.  The counts live in this closure.  Returns ((kernel
    records, copy records), add, take)."""
    kept: Tuple[List[KernelActivity], List[CopyActivity]] = ([], [])
    delivered = [0, 0]
    names = ("kernel", "copy")

    def add(which: int, record) -> None:
        kept[which].append(record)
        delivered[which] += 1

    def take(which: int, seen) -> Tuple[list, Optional[str]]:
        held, n = kept[which], delivered[which]
        problem = None
        if seen is not held or type(seen) is not list:
            problem = f"the CUPTI tracer's {names[which]} records were replaced by a {type(seen).__name__}"
        elif len(held) != n:
            problem = f"the CUPTI tracer's {names[which]} records were edited: {len(held)} held, {n} delivered"
        found = list(held)
        del held[:]
        delivered[which] = 0
        return found, problem

    return kept, add, take


_TRACER: Optional[CuptiKernelTracer] = None


def cupti_tracer() -> CuptiKernelTracer:
    """The process's one CUPTI tracer (CUPTI callbacks are process-global)."""
    global _TRACER
    if _TRACER is None:
        _TRACER = CuptiKernelTracer()
    return _TRACER


class HeldTracing:
    """CUPTI over the held timed calls of one ``time`` op (``Harness.op_time``): every held call
    past the warm-up is traced, so the checks that read CUPTI see the calls the headline times and
    no call can tell a traced call from a timed one (docs/gate.md, "The clocks").

    ``begin()`` (before each traced call: attaches on the first) returns the CUPTI timestamp that
    opens the call's window; ``note(t0, outcome)`` closes it after the call's device synchronise
    and adds the Triton kernels the solution launched in the call (``launches``: the worker's
    launch counter, read around each traced call, so nothing launched between the calls counts);
    ``end(out)`` flushes and detaches (before the op's first idle call and after the loop), reads
    the records (``traced_lists``: one entry per noted call, in order, of every per-call list of
    ``TRACED_FIELDS``, and the op's ``kernels``, ``kernel_durations`` and ``launched``, with what
    the record store found tampered in ``cupti_tampered``), hands them to ``report`` (the worker
    sends them to the parent at once) and only then copies them into ``out``.  The garbage
    collector is off from the flush to the report, so no solution code runs between the records
    and the parent's copy of them (case ``forge_traced_lists`` edited the lists in ``out``
    before the op's reply carried them).  ``threads_started``: the native threads that
    attaching CUPTI started (counted around the attach with ``count_threads``, no solution code
    in between), the gate's, not the solution's."""

    def __init__(self, tracer: "CuptiKernelTracer", launches, gc_switch: Tuple[Callable[[], None], Callable[[], None]],
                 count_threads: Callable[[], int] = lambda: 0,
                 report: Callable[[Dict[str, Any]], None] = lambda lists: None):
        self.tracer, self.launches = tracer, launches
        self.gc_disable, self.gc_enable = gc_switch
        self.count_threads = count_threads
        self.report = report
        self.threads_started = 0
        self.windows: List[Tuple[int, int, bool]] = []   # (CUPTI ns at begin, at note, released)
        self.calls = 0
        self.active = False
        self.launched: Dict[str, int] = {}               # Triton launches inside the traced calls
        self.launched_before: Dict[str, List[float]] = {}
        self.problems: List[str] = []                    # what the record store found tampered

    def begin(self) -> int:
        if not self.active:
            self.problems += self.tracer.take()[2]       # records from before the op are dropped
            before = self.count_threads()
            self.tracer.begin()
            self.threads_started = max(self.threads_started, self.count_threads() - before)
            self.active = True
        self.launched_before = self.launches.by_name
        return self.tracer.timestamp()

    def note(self, t0: int, outcome: str) -> None:
        self.windows.append((t0, self.tracer.timestamp(), outcome == HOLD_RELEASED))
        self.calls += 1
        before = self.launched_before
        for name, v in self.launches.by_name.items():
            n = int(v[0]) - int(before.get(name, [0])[0])
            if n > 0:
                self.launched[name] = self.launched.get(name, 0) + n

    def end(self, out: "TimingSamples") -> None:
        if not self.active:
            return
        self.gc_disable()
        try:
            self.active = False
            self.tracer.end()
            kernels, copies, problems = self.tracer.take()
            traces_copies = bool(self.tracer.traces_copies)
            lists = traced_lists(self.windows, kernels, copies, traces_copies)
            lists.update(launched=dict(self.launched), cupti_copies_traced=traces_copies,
                         cupti_tampered=self.problems + problems)
            self.report(lists)          # to the parent before any solution code runs again
            for name, value in lists.items():
                setattr(out, name, value)
            self.windows = []
        finally:
            self.gc_enable()


def traced_lists(windows: List[Tuple[int, int, bool]], records: List[KernelActivity], copies: List[CopyActivity],
                 traces_copies: bool) -> Dict[str, Any]:
    """The traced calls' CUPTI lists (``read_traced_calls`` into fresh lists, so nothing written
    into the op's samples before counts), by field of ``TRACED_FIELDS``."""
    fresh = TimingSamples()
    read_traced_calls(fresh, windows, records, copies, traces_copies)
    return {name: getattr(fresh, name) for name in TRACED_FIELDS}


def read_traced_calls(out: "TimingSamples", windows: List[Tuple[int, int, bool]], records: List[KernelActivity],
                      copies: List[CopyActivity], traces_copies: bool) -> None:
    """Each traced call's CUPTI lists into ``out`` (see ``HeldTracing``).  ``windows``: per call
    (CUPTI ns before its hold, after its synchronise, whether its hold released).  A call's
    records are those that started in its window; the first kernel named like the hold is the
    gate's, any other one is counted (``cupti_hold_records``: it would leave the kernel time and
    move the release); kernels, copies and memsets that started before the hold ended by more than
    ``HOLD_EXIT_SPREAD_NS`` ran while the call was being enqueued."""
    for t0, t1, released in windows:
        if traces_copies:
            out.cupti_d2h_bytes.append(sum(c.bytes for c in copies if c.device_to_host and t0 <= c.start_ns <= t1))
        inside = [r for r in records if t0 <= r.start_ns <= t1]
        holds = sorted((r for r in inside if r.name == HOLD_KERNEL_NAME), key=lambda r: r.start_ns)
        recs = [r for r in inside if r.name != HOLD_KERNEL_NAME]
        out.cupti_hold_records.append(max(0, len(holds) - 1))
        out.cupti_held.append(bool(released and holds))
        if released and holds:
            ended = holds[0].end_ns
            early, lead = held_prerelease([r.start_ns for r in recs], ended, HOLD_EXIT_SPREAD_NS)
            out.cupti_prerelease.append(early)
            out.cupti_prerelease_lead_us.append(lead)
            moved = [c.start_ns for c in copies if t0 <= c.start_ns <= t1]
            out.cupti_prerelease_copies.append(held_prerelease(moved, ended, HOLD_EXIT_SPREAD_NS)[0])
        out.kernel_sum_ms.append(sum(r.duration_us for r in recs) / 1e3 if recs else 0.0)
        out.kernel_span_ms.append((max(r.end_ns for r in recs) - min(r.start_ns for r in recs)) / 1e6 if recs else 0.0)
        for r in recs:
            agg = out.kernels.setdefault(r.name, [0, 0.0])
            agg[0] += 1
            agg[1] += r.duration_us
            out.kernel_durations.setdefault(r.name, []).append(float(r.duration_us))


# A timed CPU iteration whose launch the frame check drew is left out of the headline only when
# it took more than this times the median of the unchecked ones (the check costs 2.6-4x the
# interpreter's time): the flag is counted in the solution's process, so a solution that flags
# its own slow iterations may only drop outliers that move no median (red-team pass rt16).
FRAME_WATCHED_SLOWER = 1.5


def cpu_headline(samples: List[Tuple[int, float, int]], warmup: int) -> Tuple[List[float], List[int]]:
    """The CPU clock's headline samples: (ms, iteration) of the timed iterations past the warm-up,
    from ``samples`` = (iteration, wall ms, frame-watched launches in it).  An iteration in which
    ``launch_frames`` checked every Python frame of a launch (drawn per launch,
    ``interpreted.FRAME_WATCH_SHARE``) and that took more than ``FRAME_WATCHED_SLOWER`` times
    the median of the unchecked iterations is left out while at least half of the iterations
    remain, so that the draw does not move a candidate's median; else every iteration counts."""
    timed = [(i, ms, w) for i, ms, w in samples if i >= warmup]
    plain = sorted(ms for _, ms, w in timed if not w)
    if not plain:
        return [ms for _, ms, _ in timed], [i for i, _, _ in timed]
    limit = FRAME_WATCHED_SLOWER * plain[len(plain) // 2]
    kept = [(i, ms) for i, ms, w in timed if not (w and ms > limit)]
    if 2 * len(kept) < len(timed):
        kept = [(i, ms) for i, ms, _ in timed]
    return [ms for _, ms in kept], [i for i, _ in kept]


@dataclass
class TimingSamples:
    """Raw per-iteration numbers from one timing phase (all in milliseconds)."""

    latency_ms: List[float] = field(default_factory=list)        # device time (held iterations), else eager
    clock: str = "cpu"                                             # what latency_ms is: device | eager | cpu
    hold_kind: Optional[str] = None                                # the blocking kernel, when clock is device
    hold_error: Optional[str] = None                               # why the stream could not be held
    hold_timeouts: int = 0                                         # held iterations past the warm-up that timed out
    eager_latency_ms: List[float] = field(default_factory=list)   # events with the device idle before the start
    wall_ms: List[float] = field(default_factory=list)            # eager iterations: start record -> synchronised
    held_wall_ms: List[float] = field(default_factory=list)       # held iterations: release -> synchronised
    held_span_ms: List[float] = field(default_factory=list)       # held iterations: start record -> synchronised
    host_ms: List[float] = field(default_factory=list)            # held iterations: the call's host path
    latency_iters: List[int] = field(default_factory=list)        # the timed iteration of each latency_ms sample
    frame_watched: List[int] = field(default_factory=list)        # CPU: frame-watched launches per timed iteration
    eager_iters: List[int] = field(default_factory=list)          # ... of each eager_latency_ms sample
    empty_held_wall_ms: List[float] = field(default_factory=list)
    graph_latency_ms: List[float] = field(default_factory=list)
    graph_error: Optional[str] = None
    kernel_sum_ms: List[float] = field(default_factory=list)
    kernel_span_ms: List[float] = field(default_factory=list)
    kernels: Dict[str, List[float]] = field(default_factory=dict)  # name -> [count, total_us]
    kernel_durations: Dict[str, List[float]] = field(default_factory=dict)  # CUPTI: name -> each record's us
    launched: Optional[Dict[str, int]] = None    # CUDA: Triton kernels the solution launched while traced
    empty_wall_ms: List[float] = field(default_factory=list)
    cupti_error: Optional[str] = None
    cupti_d2h_bytes: List[int] = field(default_factory=list)      # per traced call: device-to-host bytes copied
    cupti_copies_traced: bool = False                              # CUPTI traced memory copies too
    cupti_held: List[bool] = field(default_factory=list)          # per traced call: behind the hold
    cupti_hold_records: List[int] = field(default_factory=list)   # per traced call: kernels named like the hold beyond the gate's own
    cupti_prerelease: List[int] = field(default_factory=list)     # per held traced call: kernels started before the release
    cupti_prerelease_copies: List[int] = field(default_factory=list)  # per held traced call: copies, memsets started before it
    cupti_prerelease_lead_us: List[float] = field(default_factory=list)  # per held traced call: hold end - first kernel start, µs
    cupti_tampered: List[str] = field(default_factory=list)      # what the tracer's record store found tampered
    launches: Dict[str, List[float]] = field(default_factory=dict)   # CPU: Triton launches {name: [count, us]}
    min_launches: Optional[int] = None   # CPU: fewest Triton launches in one timed call (None: not counted)


# what CUPTI's reading of the traced calls fills (``HeldTracing.end``), which the worker sends to the
# parent as soon as it is read; the parent keeps its own copy (evaluate._TimingConversation)
TRACED_FIELDS = ("kernel_sum_ms", "kernel_span_ms", "kernels", "kernel_durations", "launched", "cupti_d2h_bytes",
                 "cupti_copies_traced", "cupti_held", "cupti_hold_records", "cupti_prerelease",
                 "cupti_prerelease_copies", "cupti_prerelease_lead_us", "cupti_tampered")
# ... of which the profiled call fills these two too (``Harness._profile_kernels``, where CUPTI traced nothing)
PROFILED_FIELDS = ("kernels", "kernel_durations")


def untraced_lists() -> Dict[str, Any]:
    """``TRACED_FIELDS`` as an op that traced nothing leaves them (``PROFILED_FIELDS`` aside)."""
    empty = TimingSamples()
    return {name: getattr(empty, name) for name in TRACED_FIELDS if name not in PROFILED_FIELDS}


def median(values: List[float]) -> Optional[float]:
    return float(statistics.median(values)) if values else None
