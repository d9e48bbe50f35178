"""The gate's worker process: it builds ONE solution and calls it; it owns no verdict.

The parent (``session.WorkerSession``) computes every reference output in its own process and
never sends one here.  Buffers for inputs and outputs are allocated HERE and shared with the
parent (CUDA IPC / shared memory), so no memory of the parent's is mapped into this process.
Timing primitives are bound at import (``kernelwright.gate.timing``), before solution code runs,
and raw samples go back to the parent, which computes every statistic.

Messages are dicts with an ``op``: ``load``, ``alloc``, ``call``, ``time``, ``ping``, ``exit``.
While a recorded call runs (CPU), each torch op the host-op recorder sees goes to the parent at
once as a ``host_op`` message of its own, which the parent does not answer (``HostOpRecorder``).

Against a solution that patches things in its own process: the message loop (``serve``) binds
the pipe's send/recv, the op handlers and the timing primitives as locals before the solution
is imported, so replacing ``Connection.send``, ``Harness.op_time``, ``time.perf_counter``,
``torch.cuda.Event.elapsed_time``, ``torch.cuda.synchronize`` or ``kernelwright.gate.timing``
functions changes no measurement; every reply also lists what was replaced
(``integrity.changed``), which the parent turns into TIMER_TAMPERED / GATE_TAMPERED.
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from kernelwright.gate import aten_ops, cuda_share, fresh, guards, integrity, interpreted, wire
from kernelwright.gate import timing as T
from kernelwright.gate.device_info import resolve_device

# bound before any solution code runs (the timed iterations' window disables the collector)
import gc as _gc

_GC_DISABLE, _GC_ENABLE, _GC_ISENABLED = _gc.disable, _gc.enable, _gc.isenabled

FLOAT_POISON = (float("nan"), 7777.0)
INT_POISON = (-(2**31 - 1), 0)


def _hook_ids_reader() -> Callable[[], Tuple[int, ...]]:
    """A reader, bound to C builtins before any solution code runs, of everything through which
    code could run inside the harness after a call of the solution returns without being called
    by it: the profile and trace functions (and those for new threads), the timer signals'
    handlers, ``sys.monitoring``'s tools, and the depths of torch's function and dispatch mode
    stacks -- as ids and ints only, so that comparing two readings runs nobody's ``__eq__``.
    ``Harness._solution`` reads it before and after each call (red-team pass rt18: a profile
    function or a torch function mode left by the call ran the kernel after the timer stopped,
    then removed itself before the harness's integrity check)."""
    import signal
    import threading

    getprofile, gettrace = sys.getprofile, sys.gettrace
    for_threads = [getattr(threading, n) for n in ("getprofile", "gettrace") if hasattr(threading, n)]
    getsignal = signal.getsignal
    timer_signals = [getattr(signal, n) for n in ("SIGALRM", "SIGVTALRM", "SIGPROF") if hasattr(signal, n)]
    monitoring = getattr(sys, "monitoring", None)
    get_tool = monitoring.get_tool if monitoring is not None else None
    function_modes = getattr(torch._C, "_len_torch_function_stack", None)
    dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)

    def read() -> Tuple[int, ...]:
        ids = [id(getprofile()), id(gettrace())]
        ids += [id(get()) for get in for_threads]
        ids += [id(getsignal(n)) for n in timer_signals]
        if get_tool is not None:
            ids += [id(get_tool(i)) for i in range(6)]
        ids.append(function_modes() if function_modes is not None else -1)
        ids.append(dispatch_modes() if dispatch_modes is not None else -1)
        return tuple(ids)

    return read


_HOOK_IDS = _hook_ids_reader()


def poison(outputs: List[torch.Tensor], variant: int = 0) -> None:
    """Fill every tensor with the poison value of ``variant``.  Through the class's methods, never
    the tensor's own attributes: a solution can set ``y.fill_ = hook`` on a buffer it was handed,
    and the hook would run inside the harness, off the clock (red-team case ``shadow_fill``)."""
    fill = torch.Tensor.fill_
    with torch._C.DisableTorchFunctionSubclass():   # nor a subclass's __torch_function__
        for t in outputs:
            if torch.Tensor.is_floating_point(t):
                fill(t, FLOAT_POISON[variant])
            elif t.dtype == torch.bool:
                fill(t, bool(variant))
            else:
                fill(t, INT_POISON[variant])


def guard_plain_tensors(tensors: List[torch.Tensor], what: str) -> None:
    """Reject tensors that carry attributes of their own: the harness calls methods of its
    buffers and of returned tensors (``fill_``, ``copy_``, ``untyped_storage``), and an instance
    attribute of that name would run the solution's code in the harness, off the clock (red-team
    cases ``shadow_fill``, ``shadow_storage``).  ``vars`` reads the instance dict through the
    type's own descriptor, so it cannot be shadowed itself.

    Raises SolutionError(RUNTIME_ERROR, GATE_TAMPERED) naming the tensor and its attributes."""
    for t in tensors:
        if type(t) is not torch.Tensor:
            raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                f"{what} is now a {type(t).__module__}.{type(t).__qualname__}, not a torch.Tensor")
        own = vars(t)
        if own:
            raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                f"{what} carries attributes set by the solution: {sorted(own)[:8]}")


class SolutionError(Exception):
    """The solution misbehaved; ``status`` and ``reason`` say how, ``line`` (optional) in one line
    naming the solution's own file and line."""

    def __init__(self, status: str, reason: str, message: str, line: Optional[str] = None):
        super().__init__(message)
        self.status, self.reason, self.line = status, reason, line


def _raw_pipe(conn):
    """(send, recv) over the connection's file descriptor, with ``multiprocessing``'s framing
    (a 4-byte big-endian length; -1 and an 8-byte length beyond 2 GiB), through functions bound
    here.  ``Connection.send`` looks ``_send_bytes``/``_send`` up on the instance at every call, so a
    solution that sets those attributes on the worker's connection object would run its own code
    inside every message (red-team case ``pipe_hijack``: the real work after the timer stops)."""
    import io
    import struct

    from multiprocessing.reduction import ForkingPickler

    fd = conn.fileno()
    write, read, pack, unpack = os.write, os.read, struct.pack, struct.unpack
    dumps, loads = ForkingPickler.dumps, pickle.loads

    def send(obj) -> None:
        buf = bytes(dumps(obj))
        n = len(buf)
        data = (pack("!i", n) if n <= 0x7FFFFFFF else pack("!i", -1) + pack("!Q", n)) + buf
        view = memoryview(data)
        while view:
            view = view[write(fd, view):]

    def read_exact(n: int) -> bytes:
        out = io.BytesIO()
        while n > 0:
            chunk = read(fd, n)
            if not chunk:
                raise EOFError("the parent closed the pipe")
            out.write(chunk)
            n -= len(chunk)
        return out.getvalue()

    def recv():
        (n,) = unpack("!i", read_exact(4))
        if n == -1:
            (n,) = unpack("!Q", read_exact(8))
        return loads(read_exact(n))

    return send, recv


_getframe = sys._getframe   # bound before any solution code runs (LaunchCounter.inside)


class LaunchCounter:
    """Counts the Triton kernels the solution launches, by name: on CPU the interpreter's
    launches (``InterpretedFunction.run``: the CPU launch rule and the provenance ablation), on
    CUDA the JIT launcher's (``JITFunction.run``: which kernels the solution itself launched,
    correlated with CUPTI's names for provenance, and against CUPTI's records of the traced calls:
    ``guards.unrecorded_launches``).  On CUDA a launch that runs nothing (an empty grid, which
    Triton's launcher skips; no kernel returned) is not counted.  Installed at the harness's start,
    before the integrity snapshot (which then watches the wrapper) and for every language.

    The counts live in the wrapper's closure, not in attributes a solution could set (a plain
    ``counter.total`` or ``inside`` attribute would be one write away), and whether a
    torch op runs inside a launch is read from the call stack (a frame of the wrapper's own
    code), which no attribute write fakes.  A solution that edits closure cells through ctypes
    or ``__closure__`` is not seen (docs/gate.md, section 3).

    On CPU (``gate/interpreted.py``), which torch ops inside a launch the interpreter itself
    issued is read the same way: the op's calling frame must run code of a ``triton`` module
    (``issued_by_launcher``), so a pre-run hook or a plain Python function called from a
    ``@triton.jit`` body is the solution's host code; every launched kernel's body must call only
    what a GPU kernel can (``unlowered``); the ablation call drops Triton's writes."""

    def __init__(self) -> None:
        self._read = lambda: (0, {})
        self._watched = lambda: 0
        self._set_ablate = lambda on, ranges: None
        self._code = None
        self._launcher_codes: Callable[[Any], bool] = lambda code: False
        self._unlowered: Callable[[], Dict[str, str]] = dict
        # the torch function-mode classes of the gate's own (HostOpRecorder's), the only modes
        # the CPU jit-body check lets stand on the stack during a launch
        self.gate_modes: List[type] = []

    @property
    def total(self) -> int:
        return self._read()[0]

    @property
    def by_name(self) -> Dict[str, List[float]]:
        return self._read()[1]

    @property
    def frame_watched(self) -> int:
        """CPU: launches so far whose every Python frame was checked (``launch_frames``)."""
        return self._watched()

    def set_ablate(self, on: bool, outputs: Optional[List[torch.Tensor]] = None) -> None:
        """The provenance ablation call: on CPU every launch runs with its stores dropped, and its
        atomics into ``outputs``' storage (every atomic where ``outputs`` is None: a
        value-returning solution, whose outputs are not known before it returns;
        ``interpreted.WriteAblation``), so that host work done anywhere in the call, inside a
        launch included, still shows; on CUDA every launch is skipped.  Ablated launches still
        count."""
        self._set_ablate(on, None if outputs is None or not on else interpreted.storage_ranges(outputs))

    @property
    def unlowered(self) -> Dict[str, str]:
        """CPU: {kernel name: why} for every launched kernel whose body a GPU could not run
        (``interpreted.JitBodyCheck``); empty on CUDA."""
        return self._unlowered()

    def issued_by_launcher(self) -> bool:
        """Whether the torch op being dispatched was called by Triton's own code: the frame two
        above this one (the caller of the torch function mode's ``__torch_function__``) runs a
        code object of a loaded ``triton`` module.  A torch function implemented in Python
        (``torch.overrides.handle_torch_function``) or any solution frame is not."""
        return self._launcher_codes(_getframe(2).f_code)

    def inside(self) -> bool:
        """Whether the caller runs inside a counted launch (the interpreter's own torch ops)."""
        code = self._code
        f = _getframe(1)
        while f is not None:
            if f.f_code is code:
                return True
            f = f.f_back
        return False

    def install(self, interpreter: bool) -> bool:
        try:
            if interpreter:
                from triton.runtime.interpreter import InterpretedFunction as launcher
            else:
                from triton.runtime.jit import JITFunction as launcher
        except Exception:
            return False
        original = launcher.run
        state: List[Any] = [0, False, 0]      # slots _TOTAL, _ABLATE, _WATCHED: no keys to compare
        urandom, share = os.urandom, int(interpreted.FRAME_WATCH_SHARE * 65536)
        ablation = interpreted.WriteAblation() if interpreter else None
        snapshot = lowering = None     # CPU: taken below, once this wrapper is in place
        unlowered: Dict[str, str] = {}
        by_name: Dict[str, List[float]] = {}
        clock = T.now_s
        prefix = "triton::" if interpreter else ""

        capturing = (lambda: False) if interpreter else torch.cuda.is_current_stream_capturing
        # CUDA: a launch while capturing goes to the torch graph being captured, counted per replay
        note_captured = (lambda name: None) if interpreter else self._count_graph_replays(
            torch.cuda.CUDAGraph, state, by_name, capturing, _capture_id)

        def launch(fn_self, args, kwargs):
            if lowering is None:
                return original(fn_self, *args, **kwargs)
            # CPU: the interpreter runs the very function the jit-body check read
            note = lambda why: unlowered.setdefault(prefix + getattr(fn_self, "__name__", "?"), why)
            # every Python frame checked in a share of the launches, drawn here (launch_frames)
            frames = int.from_bytes(urandom(2), "big") < share
            _bump(state, _WATCHED, int(frames))
            return lowering.run(fn_self, args, dict(kwargs), note, frames=frames)

        def run(fn_self, *args, **kwargs):
            if kwargs.get("warmup"):
                return original(fn_self, *args, **kwargs)
            if state[_ABLATE] is True:
                _bump(state, _TOTAL, 1)
                return None if ablation is None else launch(fn_self, args, kwargs)
            grids: List[Any] = []
            if not interpreter and callable(kwargs.get("grid")):
                kwargs["grid"] = _recording_grid(kwargs["grid"], grids)
            t0 = clock()
            result = launch(fn_self, args, kwargs)
            if not interpreter and (result is None or not _grid_launches(grids[-1] if grids else kwargs.get("grid"))):
                return result    # nothing launched: no kernel ran, so none is counted (HeldTracing)
            # the launched kernel's own name where the launcher returns it (CompiledKernel.name)
            name = getattr(result, "name", None) if not interpreter else None
            name = prefix + (name if isinstance(name, str) else getattr(fn_self, "__name__", "?"))
            if capturing():
                note_captured(name)      # captured, not run
                return result
            _tally(by_name, name, 1, (clock() - t0) * 1e6)
            _bump(state, _TOTAL, 1)
            return result

        launcher.run = run
        if interpreter:     # what is Triton's, this wrapper included, before any solution code runs
            snapshot = interpreted.TritonSnapshot()
            lowering = interpreted.JitBodyCheck(snapshot, gate_modes=lambda: tuple(self.gate_modes))
        self._code = run.__code__
        self._read = lambda: (_counter(state[_TOTAL]), _table_copy(by_name))
        self._watched = lambda: _counter(state[_WATCHED])
        def set_ablate(on: bool, ranges) -> None:
            state[_ABLATE] = bool(on)
            if ablation is not None:
                ablation.set(on, ranges)

        self._set_ablate = set_ablate
        if interpreter:
            self._launcher_codes = snapshot.code
            self._unlowered = lambda: dict(unlowered)
        return True

    @staticmethod
    def _count_graph_replays(cls: type, state: List[Any], by_name: Dict[str, List[float]],
                             capturing: Callable[[], bool],
                             capture_id: Callable[[], Optional[int]] = lambda: None) -> Callable[[str], None]:
        """CUDA: wrap ``cls`` (``torch.cuda.CUDAGraph``)'s capture, reset and replay so that each
        replay of a graph counts the Triton launches captured into it (a solution that replays
        its own graphs launches its kernels through ``replay``, never through the JIT launcher).
        Returns ``note_captured(name)``, what the JIT wrapper calls for a launch while the current
        stream captures.

        Counted only what provably ran: a graph of exactly ``cls``
        (a subclass could put its own ``replay`` under ``super()``); a capture the wrapper saw
        begin and end on the same object, with no other capture begun meanwhile (two open
        captures count nothing) and the same CUDA capture id at both ends (``capture_id``: a
        capture ended and begun again through the C methods gets a new one); a replay outside
        any capture (a replay while capturing records a child graph and runs nothing); never
        after ``reset`` or when the executable graph changed since the capture
        (``raw_cuda_graph_exec``), nor for a graph kept for editing (``keep_graph=True``).  The
        names live in this closure, keyed by id and checked against a weak reference.  Editing
        an instantiated graph's nodes through the driver API is not seen (docs/gate.md, 3)."""
        import weakref

        begin, end, replay, reset = cls.capture_begin, cls.capture_end, cls.replay, cls.reset
        executable, kept = _graph_executable, _graph_kept   # bound now, before any solution code
        graphs: Dict[int, Tuple[Any, Dict[str, int], Any]] = {}
        capture: Dict[str, Any] = {"owner": None, "names": None, "id": None}
        conflict = object()

        def note_captured(name: str) -> None:
            names = capture["names"]
            if names is not None and capture["owner"] is not conflict:
                names[name] = names.get(name, 0) + 1

        def capture_begin(self, *args, **kwargs):
            result = begin(self, *args, **kwargs)
            if capture["owner"] is None and type(self) is cls:
                capture.update(owner=id(self), names={}, id=capture_id())
            else:
                capture.update(owner=conflict, names=None, id=None)
            return result

        def capture_end(self, *args, **kwargs):
            mine = type(self) is cls and capture["owner"] == id(self) and capture["id"] == capture_id()
            names = capture["names"]
            capture.update(owner=None, names=None, id=None)
            graphs.pop(id(self), None)
            result = end(self, *args, **kwargs)
            if mine and names is not None and not kept(self):
                try:
                    ref = weakref.ref(self)
                except TypeError:
                    ref = lambda graph=self: graph
                graphs[id(self)] = (ref, dict(names), executable(self))
            return result

        def counted_reset(self, *args, **kwargs):
            graphs.pop(id(self), None)
            return reset(self, *args, **kwargs)

        def counted_replay(self, *args, **kwargs):
            result = replay(self, *args, **kwargs)
            entry = graphs.get(id(self))
            if (entry is not None and type(self) is cls and entry[0]() is self and not capturing()
                    and executable(self) == entry[2]):
                for name, n in entry[1].items():
                    _tally(by_name, name, n, 0.0)
                    _bump(state, _TOTAL, n)
            return result

        cls.capture_begin, cls.capture_end, cls.replay, cls.reset = capture_begin, capture_end, counted_replay, counted_reset
        return note_captured


# The launch counter's tables live in its closures, where a solution can reach them (gc, the
# closures of the wrapped launcher): its scalars sit in list slots (no key comparisons), and every
# update and read below looks at exact types first, so that nothing the solution put there runs
# its own arithmetic, comparison or hashing inside the harness (red-team passes rt16: an int
# subclass whose __sub__ ran the kernel after the timer stopped; rt17: a str-subclass key whose
# __eq__ did the same when the harness looked the count up).
_TOTAL, _ABLATE, _WATCHED = 0, 1, 2


def _bump(state: List[Any], slot: int, n: int) -> None:
    """``state[slot] += n`` for the counter's own ints; any other value is left for ``_counter``."""
    value = state[slot]
    if type(value) is int:
        state[slot] = value + n


def _counter(value: Any) -> int:
    """A launch counter's value, which must be an exact int (else GATE_TAMPERED)."""
    if type(value) is not int:
        raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                            f"the gate's launch counter holds a {type(value).__name__}, not its int")
    return value


def _tally(table: Dict[str, Any], name: str, count: int, us: float) -> None:
    """Add one launch's (count, µs) to ``table[name]``; an entry that is not the counter's own
    [int, float] is left for ``_tally_copy``."""
    entry = table.get(name)
    if entry is None:
        table[name] = [count, us]
    elif _own_tally(entry):
        table[name] = [entry[0] + count, entry[1] + us]


def _own_tally(entry: Any) -> bool:
    return type(entry) is list and len(entry) == 2 and type(entry[0]) is int and type(entry[1]) is float


def _table_copy(table: Dict[str, Any]) -> Dict[str, List[Any]]:
    """A copy of the per-kernel table, whose keys must be exact strs (else GATE_TAMPERED)."""
    items = list(dict.items(table))
    for key, _ in items:
        if type(key) is not str:
            raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                f"the gate's launch counter has a {type(key).__name__} key, not a kernel's name")
    return {key: _tally_copy(entry) for key, entry in items}


def _tally_copy(entry: Any) -> List[Any]:
    """A copy of a per-kernel [count, µs] entry, which must be the counter's own (else GATE_TAMPERED)."""
    if not _own_tally(entry):
        raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                            f"the gate's launch counter holds a {type(entry).__name__} for a kernel, not its [count, us]")
    return [entry[0], entry[1]]


def _recording_grid(grid: Callable[[Any], Any], into: List[Any]) -> Callable[[Any], Any]:
    """``grid`` (a Triton launch's grid function of its meta-parameters) that also keeps each grid
    it returns in ``into``: the grid Triton's launcher then uses, without evaluating it twice."""

    def recorded(meta):
        value = grid(meta)
        into.append(value)
        return value

    return recorded


def _grid_launches(grid: Any) -> bool:
    """Whether Triton's launcher runs a kernel for ``grid`` (a tuple of up to three sizes): its C
    launcher skips a grid whose size product is not positive (``gridX * gridY * gridZ > 0``), and
    CUPTI then records nothing.  A grid it cannot read counts as launched."""
    try:
        dims = [int(g) for g in tuple(grid)[:3]]
    except Exception:
        return True
    dims += [1] * (3 - len(dims))
    return dims[0] * dims[1] * dims[2] > 0


def _graph_executable(graph) -> Any:
    """A CUDA graph's executable graph (``raw_cuda_graph_exec``), or None before it has one."""
    try:
        return graph.raw_cuda_graph_exec()
    except Exception:
        return None


def _graph_kept(graph) -> bool:
    """Whether a CUDA graph was kept for editing: only one made with ``keep_graph=True`` has a
    ``raw_cuda_graph``."""
    try:
        graph.raw_cuda_graph()
        return True
    except Exception:
        return False


def _capture_id() -> Optional[int]:
    """The CUDA stream-capture id of torch's current stream (cudaStreamGetCaptureInfo), or None
    when it cannot be read (no cuda-python, not capturing)."""
    try:
        from cuda.bindings import runtime as rt

        out = rt.cudaStreamGetCaptureInfo(torch.cuda.current_stream().cuda_stream)
        if int(out[0]) != 0 or int(out[1]) != int(rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusActive):
            return None
        return int(out[2])
    except Exception:
        return None


def _device_sample(P: T.Primitives, timing: Dict[str, Any]) -> Dict[str, Any]:
    """A CUDA timed iteration's sample, read with the op's primitives ``P``: held (``_held_call``:
    device time) or eager (``_idle_call``)."""
    if "outcome" in timing:
        return {"kind": "held", "outcome": timing["outcome"], "ms": float(P.event_elapsed(*timing["events"])),
                "held_wall_ms": timing["after_release_s"] * 1e3, "held_span_ms": timing["span_s"] * 1e3,
                "host_ms": timing["host_s"] * 1e3}
    return {"kind": "eager", "ms": float(P.event_elapsed(*timing["events"])), "wall_ms": timing["wall_s"] * 1e3}


def _keep_sample(out: T.TimingSamples, policy: T.HoldPolicy, sample: Dict[str, Any], i: int, warmup: int,
                 cuda: bool) -> None:
    """Timed iteration ``i``'s sample into the op's own lists (past the warm-up): CPU wall time;
    on CUDA a held iteration's device time where the policy keeps it (``HoldPolicy.note``), an
    idle iteration's eager latency."""
    if not cuda:
        if i >= warmup:
            out.wall_ms.append(sample["ms"])
            out.frame_watched.append(int(sample.get("watched") or 0))
        return
    if sample["kind"] == "held":
        if policy.note(i, sample["outcome"]) and i >= warmup:
            out.latency_ms.append(sample["ms"])
            out.latency_iters.append(i)
            out.held_wall_ms.append(sample["held_wall_ms"])
            out.held_span_ms.append(sample["held_span_ms"])
            out.host_ms.append(sample["host_ms"])
    elif i >= warmup:
        out.eager_latency_ms.append(sample["ms"])
        out.eager_iters.append(i)
        out.wall_ms.append(sample["wall_ms"])


class HostOpRecorder:
    """A TorchFunctionMode that records the torch functions and tensor methods the solution's
    host code calls: {"torch::op": [count, us, elements touched]}.  Inside a Triton launch only
    the interpreter's own glue (metadata, views, copies: ``guards.cpu_glue``) is left out, and only
    where Triton's code called it (``LaunchCounter.issued_by_launcher``): a pre-run hook's or a
    helper's ops, or a compute op Triton was made to call, are the solution's.  An op on a tensor
    subclass with its own ``__torch_function__`` is recorded as ``torch::subclass_torch_function``
    (compute): the mode is off while that handler runs, so whatever it does is unseen; for the same
    reason a function that runs Python code (``torch.autograd.grad``, ``Tensor.__deepcopy__``) is
    recorded as ``torch::python_function.<name>`` (compute) unless it is glue (``guards.host_op_name``).
    (A TorchFunctionMode, not a dispatch mode or ``torch.profiler``: those import torch._dynamo, five
    seconds per worker, and replace ``torch.manual_seed`` on the way.  The host-op profile beside
    it, ``aten_ops.AtenOpProfile``, starts the profiler through torch's C functions, which import
    nothing, and records what a mode cannot see.)

    Each record leaves the process as it is made: ``report(name, us, elements)`` (the message
    loop's ``Harness._report_op``) writes it to the parent's pipe before the op returns to the
    solution, and the parent tallies them (``session.WorkerSession``).  A tally kept in this
    process until the call returned would be the solution's to clear first (red-team case
    ``recorder_tally_erase``: the dict in ``op_call``'s frame, emptied before returning)."""

    def __new__(cls, counter: LaunchCounter, report: Callable[[str, float, int], None]):
        from torch.overrides import TorchFunctionMode

        clock = T.now_s
        # the C method: a tensor subclass's own ``numel`` could report 0 (case recorder_numel_zero)
        size = torch._C.TensorBase.numel
        plain = (torch.Tensor.__torch_function__.__func__, torch._C._disabled_torch_function_impl)

        def custom_handler(values) -> bool:
            for a in values:
                for t in (a if isinstance(a, (list, tuple)) else (a,)):
                    if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
                        handler = getattr(type(t), "__torch_function__", None)
                        if getattr(handler, "__func__", handler) not in plain:
                            return True
            return False

        class _Recorder(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                name = guards.host_op_name(func)
                if counter.inside() and counter.issued_by_launcher() and guards.cpu_glue(name):
                    return func(*args, **kwargs)    # the interpreter's own argument handling
                if custom_handler(list(args) + list(kwargs.values())):
                    name = "torch::subclass_torch_function"
                t0 = clock()
                out = None
                try:
                    out = func(*args, **kwargs)
                    return out
                finally:
                    # reported even when the op raises: an op can finish its work and then raise
                    # (an out= resize warning made an error, case recorder_warning_raise)
                    us = (clock() - t0) * 1e6
                    elements = 0
                    for a in list(args) + list(kwargs.values()) + [out]:
                        for t in (a if isinstance(a, (list, tuple)) else (a,)):
                            if isinstance(t, torch.Tensor):
                                elements = max(elements, size(t))
                    report(name, us, elements)

        counter.gate_modes[:] = counter.gate_modes[-3:] + [_Recorder]
        return _Recorder()


def _dispatch(harness: "Harness", handlers: Dict[str, Any], op: Any, msg: Dict[str, Any]) -> Dict[str, Any]:
    """The reply to one parent message: its handler's, or what the handler raised as a failed reply
    (a SolutionError's status and reason; a launch the harness refused; else the traceback)."""
    try:
        handler = handlers.get(op)
        if handler is None:
            raise ValueError(f"unknown op {op!r}")
        return handler(harness, msg)
    except SolutionError as exc:
        reply = {"ok": False, "status": exc.status, "reason": exc.reason, "error": str(exc)[-4000:]}
        if exc.line:
            reply["line"] = exc.line
        return reply
    except Exception as exc:  # the harness itself failed on this message
        refused = harness._refused_launch()
        if refused is not None:   # or a refused launch stopped the solution's call
            return {"ok": False, "status": refused.status, "reason": refused.reason, "error": str(refused)}
        return {"ok": False, "status": "RUNTIME_ERROR", "reason": guards.EXCEPTION,
                "error": "".join(traceback.format_exception(exc))[-4000:]}


class Harness:
    def __init__(self, conn, device: str):
        self._conn = conn
        self.device = resolve_device(device)
        # bring up what would otherwise start threads lazily inside the solution's first call:
        # the CPU thread pool, the CUDA context, cuBLAS
        torch.randn(1 << 20).sum()
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            a = torch.randn(64, 64, device=self.device)
            (a @ a).sum().item()
        self.flusher = T.L2Flusher(self.device)
        self.sharing = cuda_share.sharing_mode()   # how CUDA buffers reach the parent
        self.prims = T.primitives(self.device)
        self.stream_pin = T.StreamPin(self.prims.stream)
        # the device-time clock's blocking kernel, built before any solution code runs (None off
        # CUDA or without cuda-python: the headline is then the eager latency, labelled so)
        self.hold = T.StreamHold.create(self.device) if self.device.type == "cuda" else None
        if self.device.type != "cuda":
            aten_ops.seal_controls()    # the host-op profile's switches, before any solution code
        # the CUPTI tracer of the held timed calls, made (and left detached) before any solution
        # code runs, so the integrity snapshot watches it from the start (HeldTracing)
        self.tracer = T.cupti_tracer() if self.device.type == "cuda" else None
        # every language: a python-language solution is held to the CPU launch rule too
        self.launches = LaunchCounter()
        interpreted = self.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
        installed = self.launches.install(interpreter=interpreted) if (interpreted or self.device.type == "cuda") else False
        self.count_launches = interpreted and installed
        self.language = ""
        self._ptrs: List[List[int]] = []
        self.fn = None
        self.prepare = None
        self.dps = True
        self.sets: List[Dict[str, List[torch.Tensor]]] = []
        self.samples: List[List[torch.Tensor]] = []
        self.output_meta: List[tuple] = []
        self.input_meta: List[tuple] = []
        self._previous_returned: List[torch.Tensor] = []
        self._retired: Optional[tuple] = None     # what an op let go of, freed after its check
        self.python_threads_at_load = threading.active_count()
        self.threads_at_load: Dict[int, str] = {}     # tid -> name once the solution is imported
        self.call_threads: Dict[int, str] = {}        # tid -> name: started during a solution call
        self._kept_records: List[Any] = []            # every host-op profile and recorder (_recording)

    # -- protocol --------------------------------------------------------------------------
    def serve(self) -> None:
        send, recv = _raw_pipe(self._conn)     # bound before any solution code runs (see _raw_pipe)

        def step(message: Dict[str, Any]) -> Dict[str, Any]:
            """One exchange with the parent inside an op (a spec on demand, a sample point)."""
            send(message)
            answer = recv()
            if not isinstance(answer, dict) or answer.get("step") != message.get("step"):
                raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                    "the parent's answer is out of step with this worker's request")
            return answer

        def report_op(name: str, us: float, elements: int) -> None:
            """One host op the recorder saw, sent now (``HostOpRecorder``; the parent answers nothing)."""
            send({"host_op": (name, us, elements)})

        self._step = step
        self._report_op = report_op     # watched with its closure by the snapshot below
        handlers = {name[3:]: fn for name, fn in vars(Harness).items() if name.startswith("op_")}
        snapshot = integrity.capture(self)
        self._integrity = snapshot
        integrity.watch(snapshot, self, "_integrity")   # per-iteration checks read it from here
        changed = integrity.changed
        rebase = integrity.rebase
        prims = self.prims
        collector_off = self.device.type != "cuda"
        dispatch = _dispatch
        if collector_off:
            _GC_DISABLE()
        while True:
            try:
                msg = recv()
            except (EOFError, OSError):
                return
            op = msg.get("op")
            if op == "exit":
                return
            started = prims.now()
            try:   # what changed between messages (a thread of the solution) is reported too
                early = changed(snapshot)
            except Exception as exc:
                early = [f"integrity check failed: {type(exc).__name__}"]
            reply = dispatch(self, handlers, op, msg)
            if op == "time":
                _GC_ENABLE()   # a timed iteration that raised inside its window left it off
            if collector_off:
                # CPU: the collector runs only where the gate runs it (aten_ops.AtenOpProfile, inside
                # the host-op profile, and between timed iterations): a finalizer the collector runs
                # after a recorded call's profile, before the parent's read, went unrecorded
                # (case recorder_gc_finalizer_after_profile)
                if op == "call" and _GC_ISENABLED():
                    early.append("the garbage collector was switched on in a call")
                _GC_DISABLE()
            # what each op assigned itself, and nothing else, becomes the snapshot's value (a
            # finalizer that ran in ``alloc`` or ``release`` once set ``prepare``: pass rt16)
            if op == "load":
                rebase(snapshot, self, ("fn", "prepare", "dps", "sets", "samples"))
            elif op in ("alloc", "release"):
                rebase(snapshot, self, ("sets", "samples"))
            if self._retired is not None:
                # the buffers the op let go of are freed only now, after the rebase: what their
                # finalizers change is checked below like anything the solution changed
                self._retired = None
                if op == "release" and self.device.type == "cuda":
                    torch.cuda.empty_cache()
            if op == "load":
                reply["integrity_gaps"] = list(snapshot.gaps)   # definitions not snapshotted (integrity.py)
            try:
                reply["tampered"] = list(dict.fromkeys(early + changed(snapshot)))
            except Exception as exc:
                reply["tampered"] = early + [f"integrity check failed: {type(exc).__name__}"]
            reply["op_wall_s"] = prims.now() - started
            if op == "ping":
                reply["pong"] = msg.get("nonce")
            send(reply)

    def op_ping(self, msg) -> Dict[str, Any]:
        return {"ok": True}

    def _gate_action(self, fn):
        """Run one of the gate's own actions (no solution code) and accept what it replaces in
        the watched namespaces (the profiler's lazy imports), without hiding earlier changes."""
        snap = getattr(self, "_integrity", None)
        before = set(integrity.changed(snap)) if snap is not None else set()
        try:
            return fn()
        finally:
            if snap is not None:
                integrity.accept(snap, set(integrity.changed(snap)) - before)

    def _warm_profiler(self) -> None:
        if getattr(self, "_profiler_warm", False):
            return

        def warm():
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CUDA] if self.device.type == "cuda" else [ProfilerActivity.CPU]
            with profile(activities=acts):
                torch.zeros(1, device=self.device).add_(1)

        self._gate_action(warm)
        self._profiler_warm = True

    # -- load ------------------------------------------------------------------------------
    def op_load(self, msg) -> Dict[str, Any]:
        from kernelwright.trace import Solution

        solution = Solution.model_validate_json(msg["solution"])
        self.dps = solution.spec.destination_passing_style
        root = Path(tempfile.mkdtemp(prefix="kw-solution-"))
        package = f"kwsol_{solution.content_hash()[:12]}"
        solution.write_sources(root / package)
        # how errors name the solution's files: its own paths (kernel.py), not the temporary copy's
        # and not the internal package name kwsol_<hash>
        self._source_names = {f"{root / package}/": "", f"{package}.": "", package: solution.name}
        self.language = solution.spec.language.value
        py_before, native_before = threading.active_count(), guards.native_thread_count()
        try:
            if solution.spec.language.value in ("cuda", "cpp") and not solution.spec.entry_file.endswith(".py"):
                self.fn = self._build_extension(solution, root / package, package)
            else:
                sys.path.insert(0, str(root))
                module_name = package + "." + solution.spec.entry_file[:-3].replace("/", ".")
                module = importlib.import_module(module_name)
                self.fn = getattr(module, solution.spec.entry_symbol)
                prep = msg.get("prepare")
                if prep and msg.get("trusted"):
                    self.prepare = getattr(module, prep)
        except Exception as exc:
            raise self._solution_error("COMPILE_ERROR", guards.BUILD_FAILED, exc) from exc
        if not callable(self.fn):
            raise SolutionError("COMPILE_ERROR", guards.BUILD_FAILED, f"entry {solution.spec.entry_point} is not callable")
        self.threads_at_load = guards.native_thread_names()
        return {"ok": True, "threads": guards.native_thread_count(), "children": guards.child_process_count(),
                "py_threads": threading.active_count(), "py_threads_before": py_before,
                "threads_before": native_before, "counts_launches": self.count_launches}

    def _solution_error(self, status: str, reason: str, exc: BaseException) -> "SolutionError":
        """A SolutionError for an exception of the solution's: its traceback with the solution's
        own file names, and one line (``kernel.py, line 12: SyntaxError: invalid syntax``)."""
        from kernelwright.diagnostics import exception_line, rename

        names = getattr(self, "_source_names", {})
        text = rename("".join(traceback.format_exception(exc)), names)[-4000:]
        return SolutionError(status, reason, text, exception_line(exc, names))

    def _build_extension(self, solution, folder: Path, package: str):
        from torch.utils.cpp_extension import load

        sources = [str(folder / s.path) for s in solution.sources if s.path.endswith((".cu", ".cpp", ".cc"))]
        module = load(name=package, sources=sources, verbose=False,
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"])
        return getattr(module, solution.spec.entry_symbol)

    # -- buffers ---------------------------------------------------------------------------
    def _empty(self, shape, dtype: str) -> torch.Tensor:
        if self.device.type == "cpu":   # sealed against shrinking: the parent maps it (wire.py)
            return wire.sealed_shared_tensor(tuple(shape), getattr(torch, dtype))
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=self.device)

    def _buffers(self, specs: List[Tuple[Any, str]]) -> List[torch.Tensor]:
        """Empty tensors for ``specs`` ((shape, dtype name) pairs): shared memory on the CPU; on
        CUDA torch's allocator (sent by legacy CUDA IPC), or with ``sharing == "fd"`` one
        shareable allocation (gate/cuda_share.py)."""
        if self.device.type == "cuda" and self.sharing == "fd":
            return cuda_share.allocate_views([(tuple(shape), getattr(torch, dt)) for shape, dt in specs], self.device)
        return [self._empty(shape, dt) for shape, dt in specs]

    def _send_form(self, reply: Dict[str, Any]) -> Dict[str, Any]:
        """``reply`` as it goes to the parent: with ``sharing == "fd"`` its CUDA tensors as view
        records of descriptors handed over by this process's resource sharer."""
        if self.device.type == "cuda" and self.sharing == "fd":
            from multiprocessing.resource_sharer import DupFd

            return cuda_share.share_tree(reply, DupFd)
        return reply

    def op_alloc(self, msg) -> Dict[str, Any]:
        """Allocate ``sets`` input/output buffer sets and ``samples`` output-shaped slots."""
        self.input_meta = [tuple(m) for m in msg["inputs"]]      # (name, shape|None, dtype)
        self.output_meta = [tuple(m) for m in msg["outputs"]]    # (name, shape, dtype)
        self._retire()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        ins = [(shape, dt) for _, shape, dt in self.input_meta if shape is not None]
        outs = [(shape, dt) for _, shape, dt in self.output_meta]
        flat = iter(self._buffers((ins + outs) * msg["sets"] + outs * msg["samples"]))
        for _ in range(msg["sets"]):
            self.sets.append({"inputs": [next(flat) for _ in ins], "outputs": [next(flat) for _ in outs]})
        for _ in range(msg["samples"]):
            self.samples.append([next(flat) for _ in outs])
        self._ptrs = [[guards.storage_span(t)[0] for t in st["inputs"] + st["outputs"]] for st in self.sets]
        return self._send_form({"ok": True, "sets": self.sets, "samples": self.samples})

    def op_release(self, msg) -> Dict[str, Any]:
        """Let go of the buffer sets and samples (``op_alloc``) and, on CUDA, hand the allocator's
        cached blocks back to the device (``torch.cuda.empty_cache``), so that a worker paused
        while other candidates are judged holds no more than its context and what the solution
        keeps itself.  The parent sends it after each workload (``evaluate.release_buffers``);
        the next workload allocates afresh.  The message loop does both before its integrity
        check (``_retire``).  Replies with how many buffers it let go of."""
        dropped = sum(len(st["inputs"]) + len(st["outputs"]) for st in self.sets) + sum(map(len, self.samples))
        self._retire()
        return {"ok": True, "dropped": dropped}

    def _retire(self) -> None:
        """Empty the buffer sets, samples and last returned outputs, holding the old ones in
        ``_retired`` until the message loop has taken what the op assigned (then it frees them,
        before its integrity check): a finalizer the solution put on one of them never runs
        inside the gate's op, and what it changes is reported with the op's reply."""
        self._retired = (self.sets, self.samples, self._previous_returned)
        self.sets, self.samples, self._previous_returned, self._ptrs = [], [], [], []

    def _note_call_threads(self, before: Dict[int, str]) -> None:
        """Remember the native threads started during a solution call ({tid: name} snapshot
        ``before`` it) and forget those that have ended: ``call_threads`` holds the threads the
        solution's calls started that are still alive.  Threads this process starts between calls
        (the gate's own input generation and exchanges) are not the solution's."""
        now = guards.native_thread_names()
        self.call_threads.update({tid: name for tid, name in now.items() if tid not in before})
        self.call_threads = {tid: name for tid, name in self.call_threads.items() if tid in now}

    def _new_thread_names(self, limit: int = 8) -> List[str]:
        """Names of the threads started since the solution was imported (for the BACKGROUND_THREAD
        message: which library or code started them)."""
        return sorted(name for tid, name in guards.native_thread_names().items()
                      if tid not in self.threads_at_load)[:limit]

    def _check_rebound(self, set_index: int) -> None:
        """After each call: the buffers carry no attributes of their own and still own the storage
        they were allocated with."""
        st = self.sets[set_index]
        guard_plain_tensors(st["inputs"] + st["outputs"], "buffer")
        now = [guards.storage_span(t)[0] for t in st["inputs"] + st["outputs"]]
        if now != self._ptrs[set_index]:
            raise SolutionError("RUNTIME_ERROR", guards.INPUT_MUTATED,
                                "an input or output buffer was rebound to other storage during the call")

    def _args(self, set_index: int, scalars: Dict[str, Any]) -> List[Any]:
        tensors = iter(self.sets[set_index]["inputs"])
        return [scalars[name] if shape is None else next(tensors) for name, shape, _ in self.input_meta]

    # -- one call --------------------------------------------------------------------------
    def _call(self, args: List[Any], outputs: List[torch.Tensor], state: Any = None, stream: Any = None):
        """One call of the solution with ``stream`` (default: the harness's) as the current stream.

        Raises:
            SolutionError: STREAM_SWITCHED when the call returns with another stream current
                (its work, or its join of a private stream, would miss the harness's events)."""
        kwargs = {} if state is None else {"state": state}
        pin = self.stream_pin
        pin.select(stream)
        if self.dps:
            self._solution(self.fn, *args, *outputs, **kwargs)
            returned = None
        else:
            returned = self._solution(self.fn, *args, **kwargs)
        if not pin.holds(stream):
            pin.select(stream)
            raise SolutionError("RUNTIME_ERROR", guards.STREAM_SWITCHED,
                                "the call returned with another CUDA stream current than the one it was "
                                "called on (use `with torch.cuda.stream(...)`, which restores it; a failed "
                                "`torch.cuda.graph` capture leaves its capture stream current)")
        return returned

    @staticmethod
    def _solution(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` -- the solution's entry point or its prepare hook -- which must
        leave no hook behind that was not there when it began (``_hook_ids_reader``): read while
        the call is still being timed, so that a hook's own work, if it runs at the reading, is
        timed too.  Raises SolutionError(RUNTIME_ERROR, GATE_TAMPERED) otherwise."""
        before = _HOOK_IDS()
        result = fn(*args, **kwargs)
        if _HOOK_IDS() != before:
            raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                "the call returned with a profile or trace function, a torch mode, a timer "
                                "signal handler or a monitoring tool installed that was not there when it began")
        return result

    def _accept_returned(self, returned: Any, args: List[Any], outputs: List[torch.Tensor],
                         retired: Optional[List[Any]] = None) -> None:
        """Validate a value-returning solution's result and copy it into the output buffers.
        ``retired``: where the previous call's returned tensors go instead of being freed here
        (inside a timed iteration's window a freed tensor's weakref callback would run the
        solution's code before the parent's copy)."""
        names = [m[0] for m in self.output_meta]
        # the containers' own C methods: a subclass's get/__iter__ would run the solution's code
        # here, after the clock stopped (red-team case ``lazy_container``)
        kind = type(returned)
        if issubclass(kind, dict):
            # keys must be plain str: a lookup compares with the stored key's own __eq__
            odd = [type(k).__qualname__ for k in dict.keys(returned) if type(k) is not str]
            if odd:
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_NOT_TENSOR,
                                    f"the returned dict has keys that are not plain str: {odd[:4]}")
            items = [dict.get(returned, n) for n in names]
        elif issubclass(kind, tuple):
            items = list(tuple.__iter__(returned))
        elif issubclass(kind, list):
            items = list(list.__iter__(returned))
        else:
            items = [returned]
        if len(items) != len(names):
            raise SolutionError("INCORRECT_SHAPE", guards.OUTPUT_COUNT, f"returned {len(items)} outputs, expected {len(names)}")
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        for item, buf, name in zip(items, outputs, names):
            if type(item) is not torch.Tensor:
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_NOT_TENSOR,
                                    f"output {name!r} is {type(item).__module__}.{type(item).__qualname__}, not a plain torch.Tensor")
            guard_plain_tensors([item], f"returned output {name!r}")
            if item.layout != torch.strided or item.is_nested or item.requires_grad:
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_NOT_TENSOR,
                                    f"output {name!r} is not a plain strided tensor (layout {item.layout}, "
                                    f"nested {item.is_nested}, requires_grad {item.requires_grad})")
            if item.device != buf.device:
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_WRONG_DEVICE, f"output {name!r} on {item.device}")
            if tuple(item.shape) != tuple(buf.shape):
                raise SolutionError("INCORRECT_SHAPE", guards.SHAPE, f"output {name!r} shape {tuple(item.shape)} != {tuple(buf.shape)}")
            if item.dtype != buf.dtype:
                raise SolutionError("INCORRECT_DTYPE", guards.DTYPE, f"output {name!r} dtype {item.dtype} != {buf.dtype}")
            if any(guards.overlaps(item, x) for x in inputs):
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_ALIASES_INPUT, f"output {name!r} is a view of an input")
            if any(guards.overlaps(item, p) for p in self._previous_returned):
                raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_REUSED,
                                    f"output {name!r} is the storage returned by the previous call (cached output)")
        for item, buf in zip(items, outputs):
            torch.Tensor.copy_(buf, item)
        # the caller owns returned tensors: scribble over them, so that a solution that hands out
        # the same storage again (an output cache) hands out poison
        poison(list(items), 1)
        if retired is not None:
            retired.append(self._previous_returned)
        self._previous_returned = list(items)  # kept alive until the next call returns

    def _aten_ops(self) -> aten_ops.AtenOpProfile:
        """The dispatcher's record of a recorded CPU call's aten ops, beside ``HostOpRecorder``
        (``aten_ops``: what a torch function mode cannot see)."""
        return aten_ops.AtenOpProfile(self._report_op,
                                      lambda message: SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED, message))

    def _checked_call(self, set_index: int, scalars, state=None, record_ops: bool = False):
        args = self._args(set_index, scalars)
        outputs = self.sets[set_index]["outputs"]
        try:
            if not record_ops:
                returned = self._call(args, outputs, state)
            else:
                # the returned value is taken and let go of inside the profile: a finalizer it carries
                # runs there, recorded (case recorder_returned_list_del)
                profile, recorder = self._recording()
                with profile:
                    with recorder:
                        returned = self._call(args, outputs, state)
                    self._after_call(set_index, returned, args, outputs)
                    returned = None
                return args
        except SolutionError:
            raise
        except Exception as exc:
            refused = self._refused_launch()
            if refused is not None:
                raise refused from exc
            status = "COMPILE_ERROR" if "CompilationError" in type(exc).__name__ else "RUNTIME_ERROR"
            raise self._solution_error(status, guards.EXCEPTION, exc) from exc
        self._after_call(set_index, returned, args, outputs)
        return args

    def _after_call(self, set_index: int, returned: Any, args: List[Any], outputs: List[torch.Tensor]) -> None:
        self._check_rebound(set_index)
        if not self.dps:
            self._accept_returned(returned, args, outputs)

    def _recording(self) -> Tuple[aten_ops.AtenOpProfile, Any]:
        """A recorded CPU call's host-op profile and recorder, kept alive for the worker's life: a
        finalizer the solution puts on either would otherwise run when the harness lets go of it,
        after the profile stopped and before the parent's read (case recorder_profile_object_finalizer)."""
        pair = (self._aten_ops(), HostOpRecorder(self.launches, self._report_op))
        self._kept_records.append(pair)
        return pair

    def _refused_launch(self) -> Optional[SolutionError]:
        """CPU: the error for a call that raised after the jit-body check refused one of its
        launches (``interpreted.JitBodyCheck``: a launch stopped at a frame of the solution's
        code raises inside it), as BUILD_FAILED; None where none was refused."""
        unlowered = self.launches.unlowered if self.count_launches else {}
        if not unlowered:
            return None
        name, why = next(iter(unlowered.items()))
        return SolutionError("COMPILE_ERROR", guards.BUILD_FAILED,
                             f"{name} runs under the interpreter but is not a GPU kernel: {why}")

    def op_call(self, msg) -> Dict[str, Any]:
        """One call on buffer set ``set``; the parent filled the inputs and poisoned the outputs."""
        set_index = msg["set"]
        if msg.get("churn"):
            churn = [torch.empty(int(n), dtype=torch.uint8, device=self.device) for n in (1 << 20, 3 << 18, 5 << 16)]
        threads_before = guards.native_thread_names()   # the solution's prepare hook counts as its call
        state = self._prepare(set_index, msg["scalars"])
        before = self.launches.total
        self.launches.set_ablate(bool(msg.get("ablate")) and self.count_launches,
                                 self.sets[set_index]["outputs"] if self.dps else None)
        try:
            self._checked_call(set_index, msg["scalars"], state, record_ops=self.count_launches)
        finally:
            self.launches.set_ablate(False)
        launched = self.launches.total - before
        self.prims.sync()
        self._note_call_threads(threads_before)
        if msg.get("churn"):
            del churn
        return {"ok": True, "threads": guards.native_thread_count(), "children": guards.child_process_count(),
                "new_threads": self._new_thread_names(), "call_threads": sorted(self.call_threads.values()),
                "py_threads": threading.active_count(), "launches": launched if self.count_launches else None,
                "l2_limit": self._l2_limit(),
                "unlowered": self.launches.unlowered if self.count_launches else {}}

    def _l2_limit(self) -> Optional[int]:
        if self.device.type != "cuda":
            return None
        try:
            return T.persisting_l2_limit()
        except Exception:
            return None

    def _prepare(self, set_index: int, scalars):
        if self.prepare is None:
            return None
        state = self._solution(self.prepare, *self._args(set_index, scalars))
        self.prims.sync()
        return state

    # -- timing ----------------------------------------------------------------------------
    def _regenerate(self, builtin, workload, spec, set_index: int) -> Dict[str, Any]:
        """Fill buffer set ``set_index`` with the inputs of ``spec`` (``fresh.expand``)."""
        new = dict(dict.items(fresh.expand(builtin, workload, spec, self.device)))   # a plain dict
        tensors = iter(self.sets[set_index]["inputs"])
        scalars = {}
        with torch._C.DisableTorchFunctionSubclass():
            for name, shape, _ in self.input_meta:
                if shape is None:
                    scalars[name] = new[name]
                else:
                    torch.Tensor.copy_(next(tensors), new[name])   # the class's method (see poison)
        return scalars

    def _integrity_now(self) -> frozenset:
        """What the integrity snapshot reports replaced right now (an op's baseline, kept in the
        op's own local variable: a harness attribute could be rewritten by the solution)."""
        snap = getattr(self, "_integrity", None)
        return frozenset(integrity.changed(snap)) if snap is not None else frozenset()

    def _check_integrity(self, base: frozenset) -> None:
        """Between timed iterations (off the clock): nothing the integrity snapshot covers was
        replaced.  The check after each message is not enough inside the timing message: a hook
        installed by one timed call, used by the harness's steps before the next (input
        regeneration, poisoning, the L2 flush) and removed before the last would never be seen
        (case ``flush_hook``).  A few milliseconds per check, off the clock.
        Raises SolutionError(RUNTIME_ERROR, TIMER_TAMPERED or GATE_TAMPERED)."""
        snap = getattr(self, "_integrity", None)
        if snap is None:   # outside serve(); inside it, a removed snapshot is itself a change (serve's watch)
            return
        # what was already replaced when the op began is reported with the reply (the trace keeps
        # its latency); only what appeared since stops the timing here
        found = [x for x in integrity.changed(snap) if x not in base]
        if found:
            timer, _ = integrity.split(found)
            raise SolutionError("RUNTIME_ERROR", guards.TIMER_TAMPERED if timer else guards.GATE_TAMPERED,
                                f"replaced in the worker during the timed iterations: {found[:12]}")

    def _spec(self, phase: str, i: int):
        """The input spec of iteration ``i`` of ``phase``, asked from the parent now: no call of
        the solution ever sees the inputs of a later iteration (red-team case ``future_inputs``)."""
        return self._step({"step": "spec", "phase": phase, "i": i})["spec"]

    def _done(self, phase: str, i: int, sample: Optional[Dict[str, Any]] = None) -> None:
        """Tell the parent that iteration ``i`` finished (device synchronised), with its timing
        ``sample`` read just now (the parent keeps the samples: the worker's own lists, which
        the solution can reach through frames, are only compared), and wait while it decides,
        with its own randomness, whether to copy this iteration's outputs for a check: nothing
        runs in this process meanwhile, so no later call can repair a checked output (red-team
        case ``repair_checked``)."""
        message = {"step": "done", "phase": phase, "i": i}
        if sample is not None:
            message["sample"] = sample
        self._step(message)

    def _require_poison(self, outputs: List[torch.Tensor], phase: str, i: int) -> None:
        """Off the clock, just before the L2 flush and the timed call: every output buffer still
        holds the poison written after the inputs' regeneration.  Anything else means code ran
        in the harness's own window and wrote the outputs there (a finalizer, a weakref or gc
        callback, a hook), so the timed call would not have had to compute them.  Checked before
        the flush, which stays the last step before the clock (reading the outputs would warm
        the L2).  Raises SolutionError(RUNTIME_ERROR, OUTPUT_PREWRITTEN)."""
        with torch._C.DisableTorchFunctionSubclass():
            for k, t in enumerate(outputs):
                if torch.Tensor.is_floating_point(t):
                    held = torch.isnan(t).all()
                elif t.dtype == torch.bool:
                    held = torch.logical_not(t).all()
                else:
                    held = torch.eq(t, INT_POISON[0]).all()
                if not bool(held):
                    raise SolutionError("RUNTIME_ERROR", guards.OUTPUT_PREWRITTEN,
                                        f"output {k} of {phase} iteration {i} no longer held the poison right "
                                        "before the timed call: it was written in the harness's window, off the clock")

    def op_time(self, msg) -> Dict[str, Any]:
        """Timed iterations.  Every iteration gets freshly generated input contents (its spec,
        asked from the parent just before it: ``_spec``) in one of the buffer sets (rotating
        addresses), poisoned outputs and a cold L2; after each call the parent may copy the
        outputs for a check (``_done``).  On CUDA the iterations alternate between the two
        clocks (``timing.HoldPolicy``): held (device time, ``_held_call``) and idle (eager
        latency, ``_idle_call``).  Clocks and events: ``self.prims`` (bound before the solution
        was imported).  The loop stays in this frame: red-team cases find the timed calls by it."""
        from kernelwright import definitions
        from kernelwright.trace import Workload

        P = self.prims
        builtin = definitions.resolve(msg["definition"])
        workload = Workload.model_validate_json(msg["workload"])
        count: int = msg["iterations"]
        warmup: int = msg["warmup"]
        nsets = len(self.sets)
        cuda = self.device.type == "cuda"
        base = self._integrity_now()       # before any solution code runs in this op
        out, policy = self._new_samples(cuda, warmup, count)
        traced = self._held_tracing(msg, cuda, out)
        threads_before = guards.native_thread_count()
        children_before = guards.child_process_count()
        counting = self.count_launches
        fewest = None
        gc_disable, gc_enable, gc_isenabled = _GC_DISABLE, _GC_ENABLE, _GC_ISENABLED
        for i in range(count):
            if traced is not None and not policy.holds(i):
                traced.end(out)       # before the idle calls: an attached CUPTI slows every launch
            retired: List[Any] = []   # what the harness lets go of inside the window: freed after it
            gc_disable()              # the window: from the inputs' regeneration to the parent's copy
            s = i % nsets
            scalars = self._regenerate(builtin, workload, self._spec("time", i), s)
            poison(self.sets[s]["outputs"])
            state = self._prepare(s, scalars)
            args = self._args(s, scalars)
            outputs = self.sets[s]["outputs"]
            self._require_poison(outputs, "time", i)
            self.flusher.flush()
            P.sync()
            launched_before, watched_before = self.launches.total, self.launches.frame_watched
            if not cuda:
                t0 = P.now()
                returned = self._call(args, outputs, state)
                wall = P.now() - t0
                timing = {"watched": self.launches.frame_watched - watched_before}
            elif policy.holds(i):
                t0 = traced.begin() if traced is not None and i >= warmup else None
                returned, timing = self._held_call(args, outputs, state)
                if t0 is not None:
                    traced.note(t0, timing["outcome"])
            else:
                returned, timing = self._idle_call(args, outputs, state)
            n = self.launches.total - launched_before if counting else None
            if counting:
                fewest = n if fewest is None else min(fewest, n)
            self._check_rebound(s)
            if not self.dps:
                self._accept_returned(returned, args, outputs, retired)
            P.sync()
            # the sample goes to the parent as soon as it is read (the parent keeps the samples)
            sample = {"kind": "cpu", "ms": wall * 1e3, **timing} if not cuda else _device_sample(P, timing)
            sample["launches"] = n
            self._done("time", i, sample)
            if gc_isenabled():
                raise SolutionError("RUNTIME_ERROR", guards.GATE_TAMPERED,
                                    f"the garbage collector was re-enabled inside the harness's window (timed iteration {i})")
            gc_enable()
            returned = timing = state = args = scalars = None   # finalizers run here, after the parent's copy
            retired.clear()
            self._check_integrity(base)
            _keep_sample(out, policy, sample, i, warmup, cuda)
        P.sync()
        out.min_launches = fewest
        after = self._after_timed_loop(msg, out, policy, traced, (builtin, workload))
        return {"ok": True, "samples": out.__dict__, "threads_before": threads_before,
                "children_before": children_before, "l2_limit": self._l2_limit(), **after}

    def _after_timed_loop(self, msg, out: T.TimingSamples, policy: T.HoldPolicy, traced, what) -> Dict[str, Any]:
        """After the timed loop: CUPTI's records of the held calls read, the loop's thread and
        process counts (CUPTI's own threads, started at attach, not counted), the samples
        finished, then the graph replays and (where CUPTI traced nothing) the profiled call."""
        cuda = self.device.type == "cuda"
        if traced is not None:
            traced.end(out)
        gate_threads = traced.threads_started if traced is not None else 0
        after = {"threads_after": guards.native_thread_count() - gate_threads,
                 "children_after": guards.child_process_count(), "py_threads": threading.active_count()}
        self._finish_samples(out, policy, cuda, msg["warmup"], msg["iterations"])
        if cuda and msg.get("graph_iterations") and self.prepare is None:
            self._time_graph(*what, msg, out)
        if msg.get("profile_kernels") and (traced is None or not traced.calls):
            self._profile_kernels(*what, msg, out)
        return after

    def _new_samples(self, cuda: bool, warmup: int, count: int) -> Tuple[T.TimingSamples, T.HoldPolicy]:
        """An op's empty samples (with the blocking kernel's kind, or why there is none) and the
        device-time policy of its ``count`` iterations (``timing.HoldPolicy``: held only where a
        hold exists)."""
        out = T.TimingSamples()
        policy = T.HoldPolicy(cuda and self.hold is not None, warmup, count)
        if cuda:
            out.hold_kind = self.hold.kind if self.hold is not None else None
            out.hold_error = None if self.hold is not None else (T.StreamHold.why_not(self.device) or "unavailable")
        return out, policy

    def _finish_samples(self, out: T.TimingSamples, policy: T.HoldPolicy, cuda: bool, warmup: int, count: int) -> None:
        """After the timed loop: which clock ``latency_ms`` is (device where any iteration could be
        held, else eager; cpu), and on CUDA the empty measurements, sent to the parent at once."""
        out.hold_timeouts = policy.timeouts
        if cuda:
            if out.latency_ms:
                out.clock = "device"
            else:   # no iteration could be held: the eager samples are the headline
                out.clock, out.latency_ms, out.latency_iters = "eager", list(out.eager_latency_ms), list(out.eager_iters)
            out.empty_wall_ms = self._empty_wall(20)
            if self.hold is not None:
                out.empty_held_wall_ms = self._empty_held_wall(20)
            self._step({"step": "sample", "phase": "empty", "i": 0,
                        "empty_wall_ms": list(out.empty_wall_ms), "empty_held_wall_ms": list(out.empty_held_wall_ms)})
        else:
            out.clock = "cpu"
            out.latency_ms, out.latency_iters = T.cpu_headline(
                list(zip(range(warmup, count), out.wall_ms, out.frame_watched)), warmup)

    def _held_call(self, args, outputs, state, call=None):
        """One call behind the blocking kernel (device time): hold, start event, the call, end
        event, release, synchronise.  Returns (what the call returned, {events, outcome, host_s:
        the call's host path, after_release_s: release -> synchronised, span_s: start record ->
        synchronised})."""
        P = self.prims
        start, end = P.event_new(T._EventBase, enable_timing=True), P.event_new(T._EventBase, enable_timing=True)
        epoch = self.hold.begin(P.stream)
        try:
            t0 = P.now()
            P.event_record(start, P.stream)
            returned = self._call(args, outputs, state) if call is None else call()
            P.event_record(end, P.stream)
            t1 = P.now()
        finally:   # a call that raises must not leave the device held until the time limit
            self.hold.release(epoch)
        P.sync()
        t2 = P.now()
        return returned, {"events": (start, end), "outcome": self.hold.outcome(epoch), "host_s": t1 - t0,
                          "after_release_s": t2 - t1, "span_s": t2 - t0}

    def _idle_call(self, args, outputs, state, call=None):
        """One call with the device idle before the start event (eager latency).  Returns (what
        the call returned, {events, wall_s: start record -> synchronised})."""
        P = self.prims
        start, end = P.event_new(T._EventBase, enable_timing=True), P.event_new(T._EventBase, enable_timing=True)
        t0 = P.now()
        P.event_record(start, P.stream)
        returned = self._call(args, outputs, state) if call is None else call()
        P.event_record(end, P.stream)
        P.sync()
        return returned, {"events": (start, end), "wall_s": P.now() - t0}

    def _empty_wall(self, n: int) -> List[float]:
        P = self.prims
        walls = []
        for _ in range(n):
            P.sync()
            start, end = P.event_new(T._EventBase, enable_timing=True), P.event_new(T._EventBase, enable_timing=True)
            t0 = P.now()
            P.event_record(start, P.stream)
            P.event_record(end, P.stream)
            P.sync()
            walls.append((P.now() - t0) * 1e3)
        return walls

    def _empty_held_wall(self, n: int) -> List[float]:
        """What the held clock's release -> synchronised wall clock reads for an empty call (ms)."""
        P = self.prims
        walls = []
        for _ in range(n):
            P.sync()
            start, end = P.event_new(T._EventBase, enable_timing=True), P.event_new(T._EventBase, enable_timing=True)
            epoch = self.hold.begin(P.stream)
            P.event_record(start, P.stream)
            P.event_record(end, P.stream)
            t1 = P.now()
            self.hold.release(epoch)
            P.sync()
            walls.append((P.now() - t1) * 1e3)
        return walls

    def _time_graph(self, builtin, workload, msg, out: T.TimingSamples) -> None:
        count = int(msg["graph_iterations"])
        base = self._integrity_now()       # the timed loop's own changes were reported or stopped it
        try:
            scalars = self._regenerate(builtin, workload, self._spec("graph", 0), 0)
            args = self._args(0, scalars)
            outputs = self.sets[0]["outputs"]
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._call(args, outputs, stream=side)
            torch.cuda.current_stream(self.device).wait_stream(side)
            T.sync(self.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                returned = self._call(args, outputs, stream=torch.cuda.current_stream(self.device))
            T.sync(self.device)
        except SolutionError:
            self.stream_pin.select()
            raise
        except Exception as exc:
            out.graph_error = f"not capturable: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            # torch.cuda.graph's exit skips restoring the stream when capture_end raises: without
            # this the rest of the worker's calls would run on the abandoned capture stream
            self.stream_pin.select()
            try:
                T.sync(self.device)
            except Exception:
                pass
            return
        P = self.prims
        # the class's method (watched by the integrity snapshot), not an attribute the solution
        # could set on the graph object through the harness's frames
        replay = torch.cuda.CUDAGraph.replay.__get__(graph)
        for i in range(count):
            self._regenerate(builtin, workload, self._spec("graph", i), 0)
            poison(outputs)
            self.flusher.flush()
            P.sync()
            # behind the hold like the headline (the replay's host submission hidden); a hold that
            # timed out leaves an eager replay, which is kept (a replay never waits for the host)
            self._require_poison(outputs, "graph", i)
            _, timing = (self._held_call if self.hold is not None else self._idle_call)(
                [], [], None, call=replay)
            start, end = timing["events"]
            if not self.dps:
                self._previous_returned = []
                self._accept_returned(returned, args, outputs)
                self._previous_returned = []
            P.sync()
            elapsed = float(P.event_elapsed(start, end))
            self._done("graph", i, {"kind": "graph", "ms": elapsed})
            self._check_integrity(base)
            out.graph_latency_ms.append(elapsed)
        del graph

    def _held_tracing(self, msg, cuda: bool, out: T.TimingSamples) -> "Optional[T.HeldTracing]":
        """CUPTI over this op's held timed calls (``msg["trace_held"]``, CUDA with a hold), or None
        (``out.cupti_error`` says why when tracing was asked for).  Its lists go to the parent as
        one ``sample`` step of phase ``cupti`` the moment they are read (``HeldTracing.end``),
        before the op's idle calls run any solution code."""
        if not (cuda and msg.get("trace_held")):
            return None
        if self.hold is None:
            out.cupti_error = "no stream hold: nothing is traced"
            return None
        tracer = self.tracer
        if tracer is None or not tracer.available():
            out.cupti_error = "cupti not available"
            return None
        step = self._step     # bound now, before this op runs any solution code

        def report(lists: Dict[str, Any]) -> None:
            step({"step": "sample", "phase": "cupti", "i": 0, **lists})

        return T.HeldTracing(tracer, self.launches, (_GC_DISABLE, _GC_ENABLE), guards.native_thread_count, report)

    def _profile_kernels(self, builtin, workload, msg, out: T.TimingSamples) -> None:
        """What one call ran.  CUDA (when CUPTI's Python bindings are missing): kernel names from
        the torch profiler.  CPU: the Triton kernels the interpreter launched, and the aten ops the
        solution's host code ran outside them, each sent to the parent as it runs (``HostOpRecorder``)."""
        scalars = self._regenerate(builtin, workload, self._spec("profile", 0), 0)
        args = self._args(0, scalars)
        state = self._prepare(0, scalars)
        cuda = self.device.type == "cuda"
        self.prims.sync()
        if not cuda:
            before = {k: list(v) for k, v in self.launches.by_name.items()}
            profile, recorder = self._recording()
            with profile, recorder:
                self._call(args, self.sets[0]["outputs"], state)
            for name, (count, us) in self.launches.by_name.items():
                c0, u0 = before.get(name, [0, 0.0])
                if count > c0:
                    out.launches[name] = [count - c0, us - u0]
            out.kernels = {k: list(v) for k, v in out.launches.items()}
            return
        from torch.profiler import ProfilerActivity, profile

        self._warm_profiler()
        with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
            self._call(args, self.sets[0]["outputs"], state)
            self.prims.sync()
        for evt in prof.key_averages():
            is_device = str(getattr(evt, "device_type", "")).endswith("CUDA")
            if cuda != is_device:
                continue
            total = float(getattr(evt, "device_time_total", 0.0) if cuda else getattr(evt, "cpu_time_total", 0.0))
            agg = out.kernels.setdefault(evt.key, [0, 0.0])
            agg[0] += int(evt.count)
            agg[1] += total


def main(conn, device: str, log_path: Optional[str] = None, boundary: Optional[Dict[str, Any]] = None) -> None:
    """Worker entry point (run in a spawned process).  ``log_path``: where stdout and stderr go
    (None: the boundary's set-up step redirected them already); ``boundary``: what the parent set
    up (``sandbox.self_test``'s expectations), tested here before any solution code runs."""
    exit_now = os._exit   # bound before any solution code runs (see _end)
    try:
        os.setsid()   # its own session and process group: descendants are counted and killed with it
    except OSError:
        pass
    from kernelwright.gate import sandbox

    boundary_report = sandbox.self_test(boundary or {"level": "none"})
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    try:
        import triton  # noqa: F401  (imported before the integrity snapshot: it patches nothing later)
    except Exception:
        pass
    try:
        harness = Harness(conn, device)
    except Exception as exc:
        conn.send({"ok": False, "status": "RUNTIME_ERROR", "reason": guards.WORKER_INIT, "error": str(exc)})
        return
    if harness.device.type == "cuda":
        try:
            # bring up Triton's CUDA backend now (on the worker's device), so that what it imports
            # lazily happens before the integrity snapshot rather than inside the first call
            import triton

            triton.runtime.driver.active.get_current_device()
        except Exception:
            pass
    # sending a shared-memory tensor starts multiprocessing's resource-sharer thread now, so
    # that it is not mistaken for a thread the solution started
    ready = {"ok": True, "ready": True, "pid": os.getpid(), "probe": wire.sealed_shared_tensor((1,), torch.float32).zero_(),
             "boundary": boundary_report}
    if harness.device.type == "cuda":   # the CUDA sharing path through this boundary, tried before any solution code
        probe = harness._buffers([((4,), "float32")])[0]
        probe.fill_(7.0)
        torch.cuda.synchronize(harness.device)
        ready["cuda_probe"] = probe
        ready = harness._send_form(ready)
    conn.send(ready)
    harness.serve()
    _end(exit_now)


def _end(exit_now: Callable[[int], None]) -> None:
    """End the worker at once when its message loop is over (the parent's ``exit``, or the pipe
    closed): flush the log streams, then ``os._exit(0)`` (``exit_now``, bound before the solution
    was imported).  A normal interpreter exit would tear down torch and Triton first, 0.6-0.8 s
    of CPU per worker for nothing: the parent waits for it in ``WorkerSession.close`` and reads
    nothing more from the worker, and it removes the worker's scratch and kills its process
    group itself, as after a worker it had to kill.  Atexit handlers and non-daemon threads of
    the solution are not waited for either."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    exit_now(0)
