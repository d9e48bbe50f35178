"""The aten ops of a recorded CPU call, from the dispatcher's own record: the kineto CPU profiler.

The worker's ``HostOpRecorder`` is a torch function mode, and a mode is off while its handler
runs a torch function: whatever a Python-level torch function or a callback does inside it --
``Tensor.apply_``'s callback, a custom ``autograd.Function.backward`` run by
``torch.autograd.grad`` or ``autograd.functional.vjp``, a ``__deepcopy__`` run by
``copy.deepcopy``, a function passed to ``handle_torch_function`` under a glue name, TorchScript,
code under ``torch._C.DisableTorchFunction`` -- never reaches the mode (red-team cases
``recorder_apply_callback``, ``recorder_autograd_grad``, ``recorder_deepcopy_hook``,
``recorder_functional_vjp``, ``recorder_glue_named_function``, ``recorder_torchscript``,
``recorder_disabled_temp_copy``).  Every aten op still goes through the dispatcher, whose
RecordFunction callbacks feed the profiler: ``AtenOpProfile`` runs the profiler (CPU activity,
input shapes) around the call and reports each op that is not glue (``guards.cpu_glue``) as
``aten::<op>`` with its µs and the most elements of any input, beside the mode's records.

Its controls are the solution's to call too, so ``seal_controls`` (run in a CPU worker before the
solution is imported) replaces them in torch's Python namespaces by a refusal and keeps the C
functions here; a profile that is not the one this module started (stopped and restarted in the
call: its start time is outside the window of the ``start`` here) is GATE_TAMPERED.  Open: the
same switches reached through ctypes in libtorch (the source scan flags ctypes), ops run in
another thread (the profiler and the mode record the calling thread only), and work that is not
a torch op (numpy, Python loops: case ``recorder_numpy_temp_copy``).
"""

from __future__ import annotations

import gc
import math
import re
import time
from typing import Callable, Iterable, Optional, Tuple

import torch
from torch._C import _autograd as _A
from torch._C import _profiler as _P

from kernelwright.gate import guards

# the C functions, bound before any solution code runs
_ENABLE, _DISABLE, _PREPARE = _A._enable_profiler, _A._disable_profiler, _A._prepare_profiler
_COLLECT = gc.collect
_NOW_NS = time.time_ns        # the profile's start time is on this clock (wall time, ns)
_CONTROLS = ("_enable_profiler", "_disable_profiler", "_prepare_profiler", "_enable_profiler_legacy",
             "_disable_profiler_legacy", "_enable_record_function", "_toggle_collection_dynamic")


def _config():
    # (state, report_input_shapes, profile_memory, with_stack, with_flops, with_modules, experimental)
    return _P.ProfilerConfig(_P.ProfilerState.KINETO, True, False, False, False, False, _P._ExperimentalConfig())


def _refused(*args, **kwargs):
    raise RuntimeError("kernelwright: the profiler's controls are the gate's in a gated CPU call")


def seal_controls(modules: Optional[Iterable] = None) -> None:
    """Replace the profiler's and RecordFunction's switches (``_CONTROLS``) in ``torch._C._autograd``,
    ``torch.autograd`` and ``torch.autograd.profiler`` by a refusal.  CPU workers only: the CUDA
    path's fallback profiler (``torch.profiler``) goes through them."""
    import torch.autograd.profiler

    for module in modules or (_A, torch.autograd, torch.autograd.profiler):
        for name in _CONTROLS:
            if hasattr(module, name):
                setattr(module, name, _refused)


# ops whose tensor lists are indices, not data (the value tensor's elements are counted)
_INDEX_LIST_OPS = re.compile(r"^aten::(?:_?index_put\w*|_unsafe_index_put|index)$")
# gathers: glue by name, but a lookup table indexed by the inputs' bit patterns computes anything
# (case recorder_glue_index_tables); counted with the elements of their largest input
_GATHERS = re.compile(r"^aten::(?:index|_unsafe_index|index_select|take|gather|take_along_dim)$")


def _recorded_name(name: str, dtypes) -> str:
    """The record's name: ``aten::lookup.<op>`` for a gather (``_GATHERS``: glue by name, so
    renamed for its elements to count); ``aten::tensor_list.<op>`` (a compute op,
    ``guards._TORCH_CPU_COMPUTE``) for an op that takes a list of tensors, whose elements the
    profile does not count (no shapes for a list: torch's fused optimizer kernels did RMSNorm at 0
    elements, case recorder_fused_optimizer_lists), but index lists; else ``name``."""
    if _GATHERS.match(name):
        return "aten::lookup." + name[len("aten::"):]     # not glue: its elements count
    if "TensorList" in dtypes and not _INDEX_LIST_OPS.match(name):
        return "aten::tensor_list." + name[len("aten::"):]
    return name


def _on_nested(name: str, shapes, dtypes) -> bool:
    """Whether an op makes or works on a nested tensor: an ``aten::_nested*`` op, or one whose first
    input the profile records with neither dtype nor shape (a nested tensor: its elements are not
    counted, and views of a buffer at data-dependent offsets gather like a table lookup, case
    recorder_nested_view_gather).  Reported as ``aten::nested.<op>``, a compute op, glue or not."""
    if name.startswith("aten::_nested"):
        return True
    return bool(dtypes) and dtypes[0] == "" and bool(shapes) and shapes[0] == []


def _elements(shapes) -> int:
    """The most elements of any tensor input (``shapes``: one list of dims per input; [] for a
    non-tensor or a 0-d tensor)."""
    return max((math.prod(s) for s in shapes if s and all(isinstance(d, int) for d in s)), default=0)


class AtenOpProfile:
    """A context manager: the profiler runs while its body runs; on exit each aten op the body ran
    that is not glue goes to ``report(name, us, elements)`` (the worker's ``_report_op``).
    Raises ``tampered(message)`` (an exception the caller makes) if the profile that ends is not
    the one it started."""

    def __init__(self, report: Callable[[str, float, int], None], tampered: Callable[[str], BaseException]):
        self._report, self._tampered = report, tampered
        self._window: Tuple[int, int] = (0, 0)

    def __enter__(self) -> "AtenOpProfile":
        config, activities = _config(), {_P.ProfilerActivity.CPU}
        _PREPARE(config, activities)
        before = _NOW_NS()
        _ENABLE(config, activities)
        self._window = (before, _NOW_NS())
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _COLLECT()     # the call's garbage, its finalizers inside the profile (the worker keeps the collector off)
        result = _DISABLE()
        start = result.trace_start_ns() if result is not None else 0
        lo, hi = self._window
        if not lo <= start <= hi:
            if exc_type is None:
                raise self._tampered("the host-op profile was stopped or restarted inside the call")
            return False
        for event in result.events():
            name = event.name()
            if not name.startswith("aten::"):
                continue
            shapes, dtypes = event.shapes(), event.dtypes()
            if _on_nested(name, shapes, dtypes):
                self._report("aten::nested." + name[len("aten::"):], event.duration_ns() / 1e3, 0)
            elif _GATHERS.match(name) or not guards.cpu_glue(name):
                self._report(_recorded_name(name, dtypes), event.duration_ns() / 1e3, _elements(shapes))
        return False
