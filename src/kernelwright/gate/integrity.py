"""Tamper detection inside the worker: has the solution replaced a clock, an event, a
synchronisation function, a gate function, the IPC path or a builtin?

``capture()`` runs in the worker BEFORE the solution is imported and records, for a fixed list of
namespaces, the identity of every attribute (and, for Python functions, of their ``__code__``,
``__defaults__``, ``__kwdefaults__`` and what their closure cells hold, which can be swapped in
place).  ``changed()`` runs after
every message and lists what differs; the parent turns timer names into TIMER_TAMPERED and the
rest into GATE_TAMPERED.

A definition whose functions cannot be listed (``all_builtins`` or one definition raising) is
not dropped in silence: ``Snapshot.gaps`` names it, the worker returns the gaps with its ``load``
reply, and the parent rejects the evaluation of that definition with INTEGRITY_INCOMPLETE (a
gap in another definition is a warning on the trace).

The worker does not depend on detection alone: its clocks, events and IPC functions are bound
before the solution runs (``timing.Primitives``, locals of ``Harness.serve``), so a patch changes
no measurement.  Detection makes the attempt visible in the trace.  What it cannot see: writes
through ctypes, mutation of objects it does not list (list items, the closure cells of functions
it does not list: the listed functions' cells are compared, and the cells of the functions they
hold), or a patch that also rewrites this module's code (see docs/gate.md, "What the gate cannot prove").
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import Any, Dict, List, Optional, Tuple

# namespaces whose entries are timers (-> TIMER_TAMPERED); everything else -> GATE_TAMPERED
_TIMER_PREFIXES = ("time.", "statistics.", "torch.cuda.", "torch._C._cuda", "torch.cuda.Event.",
                   "torch.cuda.Stream.", "kernelwright.gate.timing.", "torch.Tensor.record_stream")

_MODULES = (
    "time", "statistics", "threading", "builtins", "os", "pickle", "copyreg", "gc",
    "multiprocessing.connection", "multiprocessing.reduction", "torch.multiprocessing.reductions",
    "torch", "torch.cuda", "torch._C", "torch.profiler",
    "kernelwright.gate.timing", "kernelwright.gate.worker", "kernelwright.gate.guards",
    "kernelwright.gate.integrity", "kernelwright.gate.fresh", "kernelwright.inputs",
    "kernelwright.inputs.random", "kernelwright.inputs.paging", "kernelwright.inputs.routing",
    # the definitions whose make_inputs the worker calls between timed iterations (case inputs_hook:
    # a hook on a definition's make_inputs would do the work while the inputs are written)
    "kernelwright.definitions", "kernelwright.definitions.base",
    # definitions from FlashInfer-Bench files: their input synthesis and fixed (safetensors) inputs
    # run in the worker between timed iterations too; diagnostics words the solution's errors
    "kernelwright.definitions.generic", "kernelwright.definitions.fixed", "kernelwright.diagnostics",
    # the trace model whose methods make_inputs calls while the inputs are written
    # (``definition.axis_values``; case trace_class_method_hook), and the resource sharer whose
    # thread the gate tolerates (case sharer_thread_hijack)
    "kernelwright.trace", "kernelwright.trace.definition", "kernelwright.trace.workload",
    "kernelwright.trace.dtypes", "multiprocessing.resource_sharer",
)

# aten operators the harness runs on its own tensors between timed iterations (poisoning, input
# regeneration, the L2 flush, checks): a kernel registered over one of them through torch.library
# would run the solution's code there, off the clock (red-team case ``dispatch_fill``).  Their
# dispatcher tables are part of the hook state.
_HARNESS_OPS = ("aten::fill_.Scalar", "aten::fill_.Tensor", "aten::copy_", "aten::zero_",
                "aten::empty.memory_format", "aten::empty_strided", "aten::normal_", "aten::uniform_",
                "aten::random_", "aten::random_.from", "aten::random_.to", "aten::randn",
                "aten::randint.low", "aten::randperm", "aten::exponential_", "aten::bernoulli_.float",
                "aten::clone", "aten::contiguous", "aten::view", "aten::reshape", "aten::to.dtype",
                "aten::_to_copy", "aten::equal", "aten::eq.Tensor", "aten::isnan", "aten::isfinite",
                "aten::abs", "aten::sub.Tensor", "aten::mul.Tensor", "aten::add.Tensor", "aten::div.Tensor",
                "aten::sum", "aten::max", "aten::sort", "aten::topk", "aten::index_select", "aten::cat",
                "aten::stack", "aten::where.self", "aten::masked_fill_.Scalar",
                # the poison check before every timed call (worker.Harness._require_poison)
                "aten::all", "aten::logical_not", "aten::eq.Scalar",
                # bool() / .item() of a tensor (the poison check's verdict; case dispatch_local_scalar_dense)
                "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero",
                # the input generators' other entries (inputs.random_tensor: fp8 clamps then casts)
                "aten::randn", "aten::rand", "aten::randint", "aten::clamp_", "aten::clamp", "aten::empty_like",
                # what the built-ins' make_inputs run besides (tests/gate/test_harness_ops_watched.py)
                "aten::lt", "aten::gt", "aten::arange", "aten::full", "aten::index", "aten::select",
                "aten::slice", "aten::unsqueeze", "aten::amax", "aten::detach", "aten::index_put_",
                "aten::ones_like")


_HARNESS_OPS_ALL: List[Tuple[str, ...]] = []


def _harness_ops() -> Tuple[str, ...]:
    if not _HARNESS_OPS_ALL:
        _HARNESS_OPS_ALL.append(_expand_harness_ops())
    return _HARNESS_OPS_ALL[0]


_TRUSTED_CODE: List[Any] = []     # launch_frames.ForeignFrames made at the first hook-state read


def foreign_thread_code() -> Optional[str]:
    """A thread other than the calling one that is running Python code which did not exist at the
    first hook-state read (the snapshot, before the solution's import), or None.  The gate
    tolerates multiprocessing's resource-sharer thread (it hands the buffers' descriptors over),
    but that thread runs whatever callback was registered for the key it is asked for: a
    solution that registers its own and connects to it gets a background thread no count sees
    (case sharer_thread_hijack)."""
    if not _TRUSTED_CODE:
        return None
    frames_of = _TRUSTED_CODE[0]
    frames = _TRUSTED_CODE[2]()
    # this thread's own frame object is dropped at once: held in a local it would be a cycle
    # (frame -> its locals -> frame) that keeps the caller's frames, and every object their
    # locals hold, alive until the collector runs -- it moved when the solution's finalizers ran
    frames.pop(_TRUSTED_CODE[1](), None)
    found = None
    for tid, f in frames.items():
        while f is not None and found is None:
            if frames_of.foreign(f):
                code = f.f_code
                found = f"thread {tid} runs {code.co_name} ({code.co_filename}:{f.f_lineno})"
            f = f.f_back
    frames.clear()
    return found


class _ModuleCode:
    """The code objects of the functions (and of the classes' functions, and the code nested in
    them) of every module loaded when it is made -- before the solution's import -- with the
    globals they run with: what another thread of the worker (the resource sharer's, CUPTI's
    callbacks) may be running.  Built from the modules' namespaces (not the collector's object
    list, whose walk shifted when finalizers of the solution's objects ran)."""

    def __init__(self) -> None:
        self._pairs: set = set()
        self._keep: list = []
        for mod in list(sys.modules.values()):
            space = getattr(mod, "__dict__", None)
            if type(space) is not dict:
                continue
            for value in list(space.values()):
                self._add_value(value, 1)

    def _add_value(self, value: Any, depth: int) -> None:
        if type(value) is types.FunctionType:
            self._add_code(value.__code__, value.__globals__)
        elif type(value) in (staticmethod, classmethod):
            self._add_value(value.__func__, depth)
        elif type(value) is property:
            for f in (value.fget, value.fset, value.fdel):
                self._add_value(f, depth)
        elif issubclass(type(value), type) and depth:
            for item in list(vars(value).values()):
                self._add_value(item, depth - 1)

    def _add_code(self, code: types.CodeType, space: dict) -> None:
        key = (id(code), id(space))
        if key in self._pairs:
            return
        self._pairs.add(key)
        self._keep += (code, space)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._add_code(const, space)

    def foreign(self, frame) -> bool:
        return (id(frame.f_code), id(frame.f_globals)) not in self._pairs


def _expand_harness_ops() -> Tuple[str, ...]:
    """Every overload of every operator in ``_HARNESS_OPS``: a dispatcher entry is per overload
    (the input regeneration's ``torch.randn(..., generator=g)`` is ``aten::randn.generator``, not
    ``aten::randn``; case dispatch_randn_generator)."""
    torch = sys.modules.get("torch")
    bases = {op.split(".", 1)[0] for op in _HARNESS_OPS}
    names = set(_HARNESS_OPS)
    all_names = getattr(getattr(torch, "_C", None), "_dispatch_get_all_op_names", None) if torch else None
    if all_names is not None:
        try:
            names |= {n for n in all_names() if n.split(".", 1)[0] in bases}
        except Exception:
            pass
    return tuple(sorted(names))

_CLASSES = (
    ("torch.Tensor", lambda: __import__("torch").Tensor),
    # the harness reads storage addresses through these (guards.storage_span)
    ("torch.UntypedStorage", lambda: __import__("torch").UntypedStorage),
    ("torch._C.StorageBase", lambda: __import__("torch")._C.StorageBase),
    ("torch.cuda.Event", lambda: __import__("torch").cuda.Event),
    ("torch.cuda.Stream", lambda: __import__("torch").cuda.Stream),
    ("multiprocessing.connection.Connection", lambda: sys.modules["multiprocessing.connection"].Connection),
    ("multiprocessing.reduction.ForkingPickler", lambda: sys.modules["multiprocessing.reduction"].ForkingPickler),
    ("threading.Thread", lambda: sys.modules["threading"].Thread),
    ("multiprocessing.resource_sharer._ResourceSharer",
     lambda: __import__("multiprocessing.resource_sharer", fromlist=["_"])._ResourceSharer),
    # isinstance() on the trace model's classes (make_inputs: ``isinstance(..., ScalarInput)``)
    ("pydantic ModelMetaclass", lambda: __import__("pydantic._internal._model_construction",
                                                    fromlist=["_"]).ModelMetaclass),
    ("pydantic BaseModel", lambda: __import__("pydantic").BaseModel),
    # the device-time clock's blocking kernel and hold policy (methods swapped in place would
    # change how an iteration is held or judged)
    ("kernelwright.gate.timing.StreamHold", lambda: sys.modules["kernelwright.gate.timing"].StreamHold),
    ("kernelwright.gate.timing.HoldPolicy", lambda: sys.modules["kernelwright.gate.timing"].HoldPolicy),
    # the CUPTI tracer and its reading of the held calls (a method swapped in place would edit the records)
    ("kernelwright.gate.timing.CuptiKernelTracer", lambda: sys.modules["kernelwright.gate.timing"].CuptiKernelTracer),
    ("kernelwright.gate.timing.HeldTracing", lambda: sys.modules["kernelwright.gate.timing"].HeldTracing),
    # the launch counter's wrappers (worker.LaunchCounter): replacing one hides or fakes launches
    ("triton InterpretedFunction", lambda: __import__("triton.runtime.interpreter", fromlist=["_"]).InterpretedFunction),
    ("triton JITFunction", lambda: __import__("triton.runtime.jit", fromlist=["_"]).JITFunction),
    # ... and its graph wrappers (a replay counts the Triton launches captured into the graph)
    ("torch.cuda.CUDAGraph", lambda: __import__("torch").cuda.CUDAGraph),
    ("torch.cuda.CUDAGraph's base", lambda: __import__("torch").cuda.CUDAGraph.__mro__[1]),   # what super() reaches
)

Entry = Tuple[str, Any, Any, Any]   # (label, owner, attribute name, original object)


def _is_function(obj: Any) -> bool:
    return isinstance(obj, types.FunctionType)


_DATA = (str, bytes, int, float, complex, bool, tuple, list, dict, set, frozenset, type(None), types.ModuleType)


def _entries_of(label: str, owner: Any, names) -> List[Entry]:
    """Callable (or descriptor) attributes only: data attributes change legitimately (flags,
    counters, caches).  In kernelwright's own modules, module references too (``worker.T``)."""
    out: List[Entry] = []
    own = label.startswith("kernelwright.")
    for name in names:
        try:
            value = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        except Exception:
            continue
        if own and isinstance(value, types.ModuleType):
            out.append((f"{label}.{name}", owner, name, value))
            continue
        if isinstance(value, _DATA):
            continue
        if not (callable(value) or hasattr(value, "__get__")):
            continue
        out.append((f"{label}.{name}", owner, name, value))
    return out


def _function_state(fn: types.FunctionType, depth: int = 0) -> tuple:
    """What a Python function runs as, swapped in place without replacing the function: its code,
    defaults and keyword defaults, and the identity of what each closure cell holds, read into
    the functions those cells hold (the launch counter's ``run`` wrapper -> its ``launch`` ->
    the jit-body check: a cell set to None would switch the check off)."""
    cells = []
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:          # an empty cell
            cells.append(None)
            continue
        cells.append(_function_state(value, depth + 1) if _is_function(value) and depth < 3 else id(value))
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__, tuple(cells))


def _class_entries(label: str, cls: type) -> List[Entry]:
    return _entries_of(label, cls, list(cls.__dict__))


class Snapshot:
    """Identities of everything listed, with the code objects of Python functions."""

    def __init__(self, entries: List[Entry], extra: Dict[str, Any], classes: Dict[str, Tuple[type, frozenset]]):
        self.entries = entries
        self.classes = classes  # label -> (class, attribute names): additions shadow inherited methods
        self.codes = {label: _function_state(v) for label, _, _, v in entries if _is_function(v)}
        self.extra = extra  # label -> (getter, original)
        self.hooks = _hook_state()  # profile/trace functions, torch modes, gc callbacks at capture
        self.instances: Dict[str, Tuple[Any, frozenset]] = {}   # label -> (object, its attribute names)
        # what could not be snapshotted: "definition <name>: <error>", or ALL_DEFINITIONS + ": <error>"
        self.gaps: List[str] = []


def capture(harness: Any = None) -> Snapshot:
    entries: List[Entry] = []
    classes: Dict[str, Tuple[type, frozenset]] = {}
    for mod_name in _MODULES:
        mod = sys.modules.get(mod_name)
        if mod is None:
            try:
                mod = __import__(mod_name, fromlist=["_"])
            except Exception:
                continue
        entries += _entries_of(mod_name, mod, list(vars(mod)))
        for name, value in list(vars(mod).items()):
            # classes defined by the gate modules themselves (Harness, L2Flusher, ...)
            if isinstance(value, type) and \
                    mod_name.startswith(("kernelwright.gate", "kernelwright.definitions", "kernelwright.trace")) and \
                    getattr(value, "__module__", "") == mod_name:
                entries += _class_entries(f"{mod_name}.{name}", value)
                classes[f"{mod_name}.{name}"] = (value, frozenset(value.__dict__))
    for label, get in _CLASSES:
        try:
            cls = get()
            entries += _class_entries(label, cls)
            classes[label] = (cls, frozenset(cls.__dict__))
        except Exception:
            continue
    definition_entries, gaps = _definition_entries()
    entries += definition_entries
    extra: Dict[str, Any] = {}
    if harness is not None:
        for attr in ("flusher", "fn", "prepare", "dps", "sets", "samples", "_conn", "prims", "launches", "_step",
                     "_report_op", "hold", "stream_pin", "tracer"):
            if hasattr(harness, attr):
                extra[f"harness.{attr}"] = (lambda a=attr: getattr(harness, a, None), getattr(harness, attr))
        flusher = getattr(harness, "flusher", None)
        if flusher is not None:
            for attr in ("buffer", "_reset_persisting", "device"):
                extra[f"harness.flusher.{attr}"] = (lambda a=attr: getattr(flusher, a, None), getattr(flusher, attr, None))
    snap = Snapshot(entries, extra, classes)
    snap.gaps = gaps
    if harness is not None:
        for attr in _HARNESS_CLOSURES:
            fn = getattr(harness, attr, None)
            if _is_function(fn):
                snap.codes[f"harness.{attr}"] = _function_state(fn)
        for label, obj in (("harness", harness), ("harness.flusher", getattr(harness, "flusher", None)),
                           ("harness.launches", getattr(harness, "launches", None)),
                           ("harness._conn", getattr(harness, "_conn", None)),
                           ("harness.hold", getattr(harness, "hold", None)),
                           ("harness.stream_pin", getattr(harness, "stream_pin", None)),
                           ("harness.tracer", getattr(harness, "tracer", None))):
            if obj is not None and hasattr(obj, "__dict__"):
                snap.instances[label] = (obj, frozenset(vars(obj)))
        # the clocks' own objects hold nothing the solution may rebind (only their moving flags
        # move): the hold, the stream pin, the CUPTI tracer (its record lists: case tracer_drop_records)
        for label, moving in _MOVING_ATTRIBUTES.items():
            obj = getattr(harness, label.split(".")[1], None)
            if obj is not None and hasattr(obj, "__dict__"):
                for name, value in vars(obj).items():
                    if name not in moving:
                        snap.extra[f"{label}.{name}"] = (lambda o=obj, n=name: getattr(o, n, None), value)
    return snap


# the message loop's own functions, which reach the pipe's send and recv through their closures:
# a cell swapped in place (the host-op recorder's ``_report_op`` made to send nothing) is a change
_HARNESS_CLOSURES = ("_step", "_report_op")

# what the gate itself changes on the clocks' objects: StreamHold.begin counts its holds; the CUPTI
# tracer's begin/end/self-test set whether it is registered and which record kinds it traces
_MOVING_ATTRIBUTES = {"harness.hold": frozenset({"epoch"}), "harness.stream_pin": frozenset(),
                      "harness.tracer": frozenset({"_registered", "traces_copies", "traces_memsets"})}


def watch(snap: "Snapshot", obj: Any, attr: str, label: Optional[str] = None) -> None:
    """Add ``obj.attr``'s current value to the snapshot's identity checks (an attribute set after
    ``capture``, e.g. the harness's reference to the snapshot itself)."""
    label = label or f"harness.{attr}"
    snap.extra[label] = (lambda: getattr(obj, attr, None), getattr(obj, attr, None))


ALL_DEFINITIONS = "every definition"


def _definition_entries() -> Tuple[List[Entry], List[str]]:
    """The entries of every built-in definition object, and the gaps: one line per definition
    that could not be listed (``definition <name>: <error>``), or ``every definition: <error>``
    when the definitions themselves could not be imported or listed."""
    definitions = sys.modules.get("kernelwright.definitions")
    if definitions is None:
        return [], [f"{ALL_DEFINITIONS}: kernelwright.definitions could not be imported"]
    try:
        found = list(definitions.all_builtins())
    except Exception as exc:
        return [], [f"{ALL_DEFINITIONS}: all_builtins() raised {type(exc).__name__}: {exc}"]
    entries: List[Entry] = []
    gaps: List[str] = []
    listed = set(_MODULES)
    for builtin in found:
        name = getattr(builtin, "name", repr(builtin))
        try:
            fields = list(vars(builtin))
            entries += _entries_of(f"definition {name}", builtin, fields)
            # the globals its functions look up at each call (``make_inputs`` reaching
            # ``random_tensor``, ``make_shared_inputs`` the routing synthesis): rebinding one in
            # the definition's module hooks the input expansion as surely as wrapping the field
            # (red-team case ``inputs_global_hook``)
            for field in fields:
                mod_name = getattr(getattr(builtin, field, None), "__module__", None)
                if not isinstance(mod_name, str) or not mod_name.startswith("kernelwright.") or mod_name in listed:
                    continue
                mod = sys.modules.get(mod_name)
                if isinstance(mod, types.ModuleType):
                    listed.add(mod_name)
                    entries += _entries_of(mod_name, mod, list(vars(mod)))
        except Exception as exc:
            gaps.append(f"definition {name}: {type(exc).__name__}: {exc}")
    return entries, gaps


def gap_concerns(gaps: List[str], definition_name: str) -> List[str]:
    """The gaps that leave ``definition_name`` (a built-in's name, without ``__quick``) unwatched."""
    return [g for g in gaps if g.startswith(f"{ALL_DEFINITIONS}:") or g.startswith(f"definition {definition_name}:")]


def _instance_shadows(snap: "Snapshot") -> List[str]:
    """Attributes added to the harness's own objects since the snapshot that shadow a method of
    their class or hold a callable: ``harness._prepare = ...`` would run the solution's code inside
    the harness's own steps, before the clock starts (red-team case ``harness_override``)."""
    found: List[str] = []
    for label, (obj, names) in snap.instances.items():
        for name, value in list(vars(obj).items()):
            if name not in names and (hasattr(type(obj), name) or callable(value)):
                found.append(f"{label}.{name} (instance attribute)")
    return found


def rebase(snap: Snapshot, harness: Any, attrs) -> None:
    """Accept new values of harness attributes the harness itself just set (``fn`` after load,
    ``sets`` after alloc, ...)."""
    for attr in attrs:
        label = f"harness.{attr}"
        if label in snap.extra:
            getter, _ = snap.extra[label]
            snap.extra[label] = (getter, getter())


def accept(snap: Snapshot, labels) -> None:
    """Take the current values of ``labels`` as the originals: for changes the gate's own code
    caused (e.g. starting the torch profiler imports torch._dynamo, which wraps
    ``torch.manual_seed``)."""
    labels = set(labels)
    if any(label.startswith("hook: ") for label in labels):
        now = _hook_state()
        for label in labels:
            if label.startswith("hook: ") and label[6:] in now:
                snap.hooks[label[6:]] = now[label[6:]]
    for i, (label, owner, name, original) in enumerate(snap.entries):
        if label in labels or label + ".__code__" in labels:
            try:
                current = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
            except Exception:
                continue
            snap.entries[i] = (label, owner, name, current)
            if _is_function(current):
                snap.codes[label] = _function_state(current)
            else:
                snap.codes.pop(label, None)
    for label, (cls, names) in list(snap.classes.items()):
        added = {f"{label}.{n}" for n in set(cls.__dict__) - names}
        if added & labels:
            snap.classes[label] = (cls, names | {n for n in cls.__dict__ if f"{label}.{n}" in labels})


def _hook_state() -> Dict[str, Any]:
    """Everything through which code can run inside the harness's own work without being called
    by it: profile/trace functions (process-wide and for new threads), torch function and
    dispatch modes left on their stacks, garbage-collector callbacks and ``sys.monitoring``
    tools.  (Audit hooks cannot be listed from Python; see docs/gate.md section 3.)"""
    import gc
    import threading

    import signal

    if not _TRUSTED_CODE:
        _TRUSTED_CODE[:] = [_ModuleCode(), threading.get_ident, sys._current_frames]
    state: Dict[str, Any] = {
        "sys.setprofile": sys.getprofile(), "sys.settrace": sys.gettrace(),
        # another thread (the resource sharer's) running code made after the snapshot
        "thread running foreign code": foreign_thread_code() is not None,
        "gc.callbacks": tuple(id(c) for c in gc.callbacks),
        # a Python signal handler runs between any two bytecodes of the harness, e.g. while it
        # waits for the parent's copy of a checked output
        "signal handlers": tuple((int(n), id(signal.getsignal(n))) for n in sorted(signal.valid_signals())
                                 if _has_handler_slot(signal, n)),
    }
    for name in ("getprofile", "gettrace"):
        get = getattr(threading, name, None)       # Python >= 3.10
        if get is not None:
            state[f"threading.set{name[3:]}"] = get()
    torch = sys.modules.get("torch")
    if torch is not None:
        for label, fn in (("torch function mode", "_len_torch_function_stack"),
                          ("torch dispatch mode", "_len_torch_dispatch_stack")):
            length = getattr(torch._C, fn, None)
            if length is not None:
                state[label] = length()
    if torch is not None:
        # this thread's dispatch-key sets: a key switched on here (the Python dispatcher, which
        # runs kernels registered with OpOverload.py_impl that _dispatch_dump does not list)
        # reroutes every op the harness runs on this thread
        for label, fn in (("dispatch keys included", "_dispatch_tls_local_include_set"),
                          ("dispatch keys excluded", "_dispatch_tls_local_exclude_set")):
            keys = getattr(torch._C, fn, None)
            if keys is not None:
                state[label] = repr(keys())
        dump = getattr(torch._C, "_dispatch_dump", None)
        if dump is not None:
            for op in _harness_ops():
                try:
                    state[f"dispatcher {op}"] = dump(op)
                except Exception:
                    state[f"dispatcher {op}"] = None
    monitoring = getattr(sys, "monitoring", None)   # Python >= 3.12
    if monitoring is not None:
        state["sys.monitoring"] = tuple(monitoring.get_tool(i) for i in range(6))
    return state


def _has_handler_slot(signal, n) -> bool:
    try:
        signal.getsignal(n)
        return True
    except (ValueError, OSError):
        return False


def hooks_installed(snap: Snapshot) -> List[str]:
    """Labels (``hook: ...``) of hooks present now that were not there at ``capture``."""
    now = _hook_state()
    return [f"hook: {label}" for label, value in now.items() if value != snap.hooks.get(label)]


def changed(snap: Snapshot) -> List[str]:
    """Labels of entries that no longer hold their original object (or code), and of hooks
    installed since the snapshot (``hooks_installed``)."""
    found: List[str] = hooks_installed(snap) + _instance_shadows(snap)
    for label, owner, name, original in snap.entries:
        try:
            current = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        except Exception:
            current = _MISSING
        if current is not original:
            found.append(label)
            continue
        code = snap.codes.get(label)
        if code is not None and _function_state(original) != code:
            found.append(label + ".__code__")
    for label, (cls, names) in snap.classes.items():
        added = sorted(n for n in set(cls.__dict__) - names if n not in _BENIGN_ADDITIONS)
        found += [f"{label}.{n}" for n in added]
    for label, (getter, original) in snap.extra.items():
        try:
            if getter() is not original:
                found.append(label)
            elif label in snap.codes and _function_state(original) != snap.codes[label]:
                found.append(label + ".__code__")
        except Exception:
            found.append(label)
    return found


def split(labels: List[str]) -> Tuple[List[str], List[str]]:
    """(timer labels, other labels)."""
    timer = [x for x in labels if x.startswith(_TIMER_PREFIXES)]
    other = [x for x in labels if not x.startswith(_TIMER_PREFIXES)]
    return timer, other


_MISSING = object()
_BENIGN_ADDITIONS = {"__slotnames__", "_abc_impl", "__abstractmethods__", "__weakref__"}
_BUILTINS = builtins  # keep a reference: ``builtins`` itself is listed in _MODULES
