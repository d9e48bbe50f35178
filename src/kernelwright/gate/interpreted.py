"""The CPU gate's hold on Triton's interpreter (``TRITON_INTERPRET=1``), where a launch is ordinary
Python in the solution's own process.  Three pieces, installed by the worker's ``LaunchCounter``
before any solution code runs:

* ``WriteAblation``: the provenance ablation call runs every launch with Triton's stores dropped
  (and its atomics into the outputs), so outputs that still come out right were written by
  something else (``evaluate._check_ablation``: HOST_COMPUTE).
* ``TritonSnapshot``: what is Triton's own (code objects, functions, classes, the attributes of
  its value types), by identity, taken before the solution's import: the host-op recorder leaves
  out the interpreter's own glue inside a launch and nothing else, and the jit-body check trusts
  it; and every namespace the interpreter runs a body through (Triton's modules, classes and
  module-held instances, numpy, torch's tensor and storage classes, math, builtins, inspect,
  functools), compared by identity and type at each launch (``changed``).
* ``JitBodyCheck``: every launched kernel's body calls only what a GPU kernel can (Triton's
  language, jit functions, ``math``, methods of its values): a ``@triton.jit`` body that calls a
  Python helper, or numpy on the interpreter's handles, runs under the interpreter but is not a
  GPU kernel; and nothing of the solution's runs inside the launch (no profile or trace function,
  foreign torch mode, new gc callback, signal handler, thread, audit hook, numpy error callback,
  import hook or replaced ``sys.modules`` entry, no global whose type reads its own ``__class__``,
  no annotation but Triton's types and strings; the namespaces and the dispatch tables they hold
  read again right after it), and in a share of the launches every Python frame that starts
  inside is checked (``launch_frames``).

Rules and the attacks they answer: docs/gate.md, section 2 (row 6) and section 3 (item 10).
"""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
import math
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from kernelwright.gate import launch_frames

def storage_ranges(tensors) -> Tuple[Tuple[int, int], ...]:
    """[lo, hi) byte addresses of each tensor's whole storage, read through the class's methods
    (not attributes a solution could have set on the tensor)."""
    storage = torch.Tensor.untyped_storage
    out = []
    with torch._C.DisableTorchFunctionSubclass():
        for t in tensors:
            s = storage(t)
            out.append((int(s.data_ptr()), int(s.data_ptr()) + int(s.nbytes())))
    return tuple(out)


class WriteAblation:
    """Installed once for the worker's life: the interpreter's store and atomic builders wrapped
    (``InterpreterBuilder.create_masked_store`` -- every store path: ``tl.store``, block pointers,
    descriptors, scatter -- ``create_atomic_rmw`` and ``create_atomic_cas``), passing through
    except while ``active``.  Active, every store is dropped, and every atomic into ``ranges``
    (the outputs' storage; None: every address; a CAS on such an address becomes a load); atomics
    elsewhere still run, so a work counter still advances and every launch runs to its end.
    Dropping every store, not only those into the outputs, keeps an honest kernel that writes a
    temporary the host then copies into the outputs from reading as host compute."""

    def __init__(self) -> None:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

        store, rmw, cas = (InterpreterBuilder.create_masked_store, InterpreterBuilder.create_atomic_rmw,
                           InterpreterBuilder.create_atomic_cas)
        mode: Dict[str, Any] = {"on": False, "ranges": None}

        def kept(ptr) -> np.ndarray:
            addr = np.asarray(ptr.data).astype(np.uint64)
            keep = np.zeros(addr.shape, dtype=bool)
            if mode["ranges"] is None:
                return keep
            keep[...] = True
            for lo, hi in mode["ranges"]:
                keep &= ~((addr >= np.uint64(lo)) & (addr < np.uint64(hi)))
            return keep

        def masked_store(self, ptrs, value, mask, *rest):
            if not mode["on"]:
                return store(self, ptrs, value, mask, *rest)
            return None

        def atomic_rmw(self, op, ptr, val, mask, sem, scope):
            if mode["on"]:
                mask = TensorHandle(np.asarray(mask.data) & kept(ptr), tl.int1)
            return rmw(self, op, ptr, val, mask, sem, scope)

        def atomic_cas(self, ptr, cmp, val, sem, scope):
            if not mode["on"] or kept(ptr).all():
                return cas(self, ptr, cmp, val, sem, scope)
            return self.create_load(ptr, None, None, False)

        InterpreterBuilder.create_masked_store = masked_store
        InterpreterBuilder.create_atomic_rmw = atomic_rmw
        InterpreterBuilder.create_atomic_cas = atomic_cas
        self._mode = mode

    def set(self, on: bool, ranges: Optional[Tuple[Tuple[int, int], ...]]) -> None:
        """Start (``on``) or stop dropping writes; ``ranges``: the outputs' byte ranges, None for
        every address."""
        self._mode.update(on=bool(on), ranges=ranges)


def _value_attr_names(value_classes: List[type]) -> frozenset:
    """The attribute names of the values a kernel body holds: the classes of triton.language.core
    (tensors, constexprs, dtypes, pointer and block types, tuples...) and the plain constants a
    constexpr is (int.bit_length), as the classes define them and as their ``__init__`` sets
    them; ``handle`` and dunders left out."""
    names = set()
    for t in value_classes + [int, float, bool, str, tuple]:
        for k in t.__mro__:
            names.update(vars(k))
            init = vars(k).get("__init__")
            names.update(getattr(getattr(init, "__code__", None), "co_names", ()))
    return frozenset(n for n in names if n != "handle" and not n.startswith("__"))


class TritonSnapshot:
    """What belongs to Triton, taken once, before the solution's import: the code objects, the
    function objects and the classes of every loaded ``triton`` module (functions, methods,
    properties, code nested in them, defined in files under Triton's package folder), by
    identity -- a solution's function compiled with a Triton file name or made from Triton's code
    with globals of its own, a module it registers later, or a ``__module__`` it sets is none of
    them -- the attribute names of the values a kernel body holds (``tl.tensor``,
    ``tl.constexpr``, ``tl.dtype``, ``tl.tuple``, the built-in scalars and their bases), and the
    namespaces the interpreter runs through (every loaded Triton module, every Triton class, the
    instances Triton's modules hold, ``math`` and ``builtins``), as they were then
    (``changed``)."""

    def __init__(self) -> None:
        import triton.language as tl

        root = os.path.dirname(importlib.import_module("triton").__file__) + os.sep
        importlib.import_module("triton.runtime.interpreter")
        importlib.import_module("triton.tools.tensor_descriptor")
        # what Triton imports on a launch's first argument (mangle_type: Gluon, the code
        # generator, libdevice), imported now, with the rest of Triton: no module's code is
        # loaded inside a launch (launch_frames)
        from triton.runtime.jit import mangle_type

        for value in (importlib.import_module("torch").empty(0), 1, 1.0):
            mangle_type(value)
        self._codes: set = set()
        self._functions: set = set()
        self._classes: set = set()
        self._keep: List[Any] = []     # the objects themselves: ids stay unique while they live
        self._root = root
        modules = [m for n, m in list(sys.modules.items())
                   if (n == "triton" or n.startswith("triton.")) and isinstance(m, types.ModuleType)]
        for module in modules:
            for obj in list(vars(module).values()):
                self._add(obj)
        # the values a body holds: the classes of triton.language.core (tensors, constexprs, dtypes,
        # pointer and block types, tuples...) and the plain constants a constexpr is (int.bit_length);
        # their attributes as the classes define them and as their __init__ sets them
        self._value_classes = [t for t in vars(tl.core).values()
                               if isinstance(t, type) and t.__module__ == tl.core.__name__]
        self.value_attrs = _value_attr_names(self._value_classes)
        self._spaces = [(obj, kind, type(obj), _namespace(obj)) for obj, kind in self._namespaces(modules)]
        self._tables = self._callable_tables()
        # what the interpreter's function rewriter copies into a jit function's module
        # (FunctionRewriter._compile_and_exec), and the print it patches in as static_print
        from triton.runtime import interpreter as I

        self._interpreter_globals = dict(vars(I))
        self._print = builtins.print

    def _namespaces(self, modules: List[types.ModuleType]) -> List[Tuple[Any, str]]:
        """Every namespace the interpreter reads, with how ``changed`` compares it: Triton's value
        classes and the interpreter's machinery (strict), Triton's modules, its other classes,
        the instances its modules hold (interpreter_builder, interpreter_semantic, dtypes...),
        numpy, torch's storage layer, and ``math`` / ``builtins`` / ``inspect`` / ``functools``,
        whose functions a kernel body may call.  Sets ``_instances``."""
        from triton.runtime import autotuner as A
        from triton.runtime import interpreter as I
        from triton.runtime import jit as J
        import numpy  # noqa: F401  (its modules, read from sys.modules below)

        machinery = [getattr(m, n) for m, n in ((I, "InterpretedFunction"), (I, "GridExecutor"),
                                                (I, "InterpreterBuilder"), (I, "FunctionRewriter"),
                                                (J, "JITCallable"), (J, "ConstexprFunction"),
                                                (A, "Autotuner"), (A, "Heuristics"))
                     if isinstance(getattr(m, n, None), type)]
        strict = self._value_classes + machinery
        # numpy whole: the interpreter's arithmetic and reductions run through its Python layer
        # (np.sum -> numpy._core.fromnumeric._wrapreduction, np.vectorize for tl.erf)
        np_modules = [m for n, m in list(sys.modules.items())
                      if (n == "numpy" or n.startswith("numpy.")) and isinstance(m, types.ModuleType)]
        np_classes = {id(v): v for m in np_modules for v in list(vars(m).values())
                      if isinstance(v, type) and (getattr(v, "__module__", "") or "").split(".")[0] == "numpy"}
        spaces = [(t, "strict") for t in strict]
        spaces += [(m, "module") for m in modules + np_modules + [math, builtins, inspect, functools]]
        spaces += [(t, "class") for t in self._keep if isinstance(t, type) and not any(t is c for c in strict)]
        spaces += [(t, "class") for t in np_classes.values()]
        # torch's Python layer on the launch's argument path (GridExecutor copies each tensor's
        # storage to the host and back: Tensor.untyped_storage, _StorageBase.cpu, copy_ ...)
        import torch.storage

        spaces += [(torch.storage, "module"), (sys.modules["torch._tensor"], "module")]
        spaces += [(t, "class") for t in dict.fromkeys(
            k for c in (torch.Tensor, torch.UntypedStorage, torch.TypedStorage) for k in c.__mro__
            if k is not object and isinstance(getattr(k, "__dict__", None), types.MappingProxyType))]
        seen = set()
        for module in modules:
            for value in list(vars(module).values()):
                if id(type(value)) in self._classes and not isinstance(value, type) \
                        and isinstance(getattr(value, "__dict__", None), dict) and id(value) not in seen:
                    seen.add(id(value))
                    spaces.append((value, "instance"))
        self._instances = seen
        return spaces

    def _callable_tables(self) -> List[Tuple[Any, str, dict, Dict[Any, Tuple[int, Any]]]]:
        """The dicts the namespaces hold whose values include callables (dispatch tables such as
        interpreter_builder.codegen_fns), but modules' own dicts (compared as modules),
        sys.modules and the caches Triton fills as it runs (_GROWING_TABLES): their callable
        items, compared one by one (``_table_change``)."""
        module_dicts = {id(vars(m)) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)}
        tables = []
        for obj, kind, _, before in self._spaces:
            for name, (_, value) in before.items():
                if type(value) is dict and value is not sys.modules and id(value) not in module_dicts \
                        and (_owner_name(obj), name) not in _GROWING_TABLES and any(map(callable, value.values())):
                    tables.append((obj, name, value, {k: (id(v), v) for k, v in value.items() if callable(v)}))
        return tables

    def _add(self, obj, depth: int = 0) -> None:
        fn = getattr(obj, "__func__", obj)          # staticmethod / classmethod
        code = getattr(fn, "__code__", None) if not isinstance(obj, type) else None
        if isinstance(code, types.CodeType):
            if type(fn) is types.FunctionType and code.co_filename.startswith(self._root):
                self._functions.add(id(fn))
                self._keep.append(fn)
            self._add_code(code)
        elif isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    self._add(f, depth)
        elif isinstance(getattr(obj, "fn", None), types.FunctionType) and depth < 3:
            self._add(obj.fn, depth + 1)     # a wrapper: jit, interpreted, constexpr_function
        elif isinstance(obj, type) and depth < 3 and id(obj) not in self._classes \
                and (getattr(obj, "__module__", "") or "").split(".")[0] == "triton":
            self._classes.add(id(obj))
            self._keep.append(obj)
            for member in list(vars(obj).values()):
                self._add(member, depth + 1)

    def _add_code(self, code) -> None:
        if id(code) in self._codes or not code.co_filename.startswith(self._root):
            return
        self._codes.add(id(code))
        self._keep.append(code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._add_code(const)

    def changed(self) -> Optional[str]:
        """What was changed since the snapshot in a namespace the interpreter runs through, as
        ``owner.name``; None if nothing.  Read between launches.

        * Triton's value classes and the interpreter's machinery (``InterpretedFunction``,
          ``GridExecutor``, ``InterpreterBuilder``, ``FunctionRewriter``, ``ConstexprFunction``
          and its base, the autotuner's ``Autotuner`` and ``Heuristics``): any attribute added,
          replaced or removed (``tl.tensor.to = ...``).
        * Triton's modules and other classes, ``math`` and ``builtins``: an attribute that held
          or now holds something callable, replaced or removed, and a callable added
          (``TritonSemantic.mul = ...``, ``interpreter._implicit_cvt = ...``, ``math.eval =
          eval``); data rebound (counters, caches), submodules imported later and the
          interpreter's globals that its function rewriter copies into a jit function's module
          pass.
        * The instances Triton's modules hold (``interpreter_builder``): a callable added or
          replaced in their ``__dict__``.

        Triton's interpreter leaves its language patches (``_patch_lang``) in place after a
        device-function call (``InterpretedFunction.__call__`` never restores them): a value
        made by Triton's own code where the snapshot had another is put back, silently."""
        for obj, kind, kind_type, before in self._spaces:
            if type(obj) is not kind_type:
                return f"{object.__repr__(obj)} (its __class__ replaced)"
            name = self._namespace_change(obj, kind, before)
            if name is not None:
                return f"{_owner_name(obj)}.{name}"
        for obj, name, table, before in self._tables:
            key = _table_change(table, before)
            if key is not None:
                return f"{_owner_name(obj)}.{name}[{key!r}]"
        return None

    def _namespace_change(self, obj, kind: str, before: Dict[str, Tuple[int, Any]]) -> Optional[str]:
        lazy = _lazy_names(obj)
        """Modules and classes: every value by identity, but data of a plain type rebound to data
        of a plain type in a module (counters, flags), submodules imported later, and the
        interpreter's globals its rewriter copies into a jit function's module.  Instances: a
        callable, or an object that is neither plain data nor an array, added or replaced."""
        now = vars(obj)
        for name, (ident, old) in before.items():
            value = now.get(name, _MISSING)
            if value is old:
                continue
            if value is _MISSING:
                if kind != "instance" or not _data(old):
                    return name + " (removed)"
                continue
            if id(value) == ident:
                continue
            if kind == "instance" and _data(old) and _data(value):
                continue
            if kind == "module" and type(old) in _PLAIN and type(value) in _PLAIN:
                continue
            if callable(old) and self._triton_patch(value):
                setattr(obj, name, old)      # Triton's leaked patch: the original back
                continue
            return name
        if len(now) != len(before) + sum(n in lazy for n in now):
            for name, value in list(now.items()):
                if name in before or name in lazy:
                    continue
                if callable(value) and self._triton_patch(value):
                    delattr(obj, name)         # Triton's leaked patch of a name it added
                    continue
                if kind == "instance" and _data(value):
                    continue
                if kind == "module" and (isinstance(value, types.ModuleType) or type(value) in _PLAIN
                                         or self._interpreter_globals.get(name, _MISSING) is value):
                    continue
                return name + " (added)"
        return None

    def modules(self) -> List[types.ModuleType]:
        """The modules whose namespaces ``changed`` compares."""
        return [obj for obj, kind, _, _ in self._spaces if kind == "module"]

    def _triton_patch(self, value) -> bool:
        """Whether ``value`` is what Triton's interpreter patches into its language modules and
        classes for a call (a function of Triton's code, a partial of one, ``print``)."""
        fn = value.func if type(value) is functools.partial else value
        return fn is self._print or (type(fn) is types.FunctionType and self.code(fn.__code__))

    def code(self, code) -> bool:
        """Whether ``code`` is a code object of Triton's own."""
        return id(code) in self._codes

    def owns(self, value) -> bool:
        """Whether ``value`` is Triton's: one of its classes, a function or method whose code is
        Triton's, or an instance of one of its classes."""
        if isinstance(value, type):
            return id(value) in self._classes
        # by type, never by an attribute the value answers (tl.tuple answers any of its field
        # names); a function by identity (Triton's code with the solution's globals is not
        # Triton's); a bound method only of Triton's function on an object Triton's modules held
        # at the snapshot (interpreter_semantic.to_tensor, which every rewritten body calls) or
        # on a class of Triton's
        if type(value) is types.FunctionType:
            return id(value) in self._functions
        if type(value) is types.MethodType:
            owner = value.__self__
            return self.owns(value.__func__) and (id(owner) in self._instances or
                                                   (isinstance(owner, type) and id(owner) in self._classes))
        if type(value) in (staticmethod, classmethod):
            return self.owns(value.__func__)
        return id(type(value)) in self._classes


class JitBodyCheck:
    """Whether an interpreted launch runs what a GPU kernel could: under ``TRITON_INTERPRET=1``
    a ``@triton.jit`` body is ordinary Python, so it could call a helper that computes with torch
    or numpy, or read the interpreter's ``handle`` arrays.  Read from the bytecode of the very
    function the interpreter runs (``InterpretedFunction.rewrite()``: the launch wrapper then
    runs that function itself, ``run``), and of every jit function it names, recursively:

    * no nested code (lambdas, comprehensions, inner functions), no import;
    * every global it names is a constant (bool, int, float, str, None, ``tl.constexpr``, a
      dtype), a jit function, one of ``SAFE_BUILTINS``, a function of ``math``, or Triton's own
      (``TritonSnapshot.owns``); a module only as the head of a chain of attributes that ends in
      one of those (``tl.load``, ``mymod.jit_helper``);
    * every attribute read off a value the body holds is one Triton's value types had before
      the solution's import, never ``handle`` or a dunder;
    * every launch argument is a tensor, a scalar, a dtype, a Triton object, a jit function or a
      tuple of those;
    * no Triton pre-run hook (solution code between this check and the kernel).

    ``check`` returns None or why not (one line)."""

    SAFE_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "print", "isinstance",
                               "tuple", "zip", "enumerate", "abs", "divmod", "pow", "round", "reversed"})
    _LOAD_ATTR = ("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR")

    def __init__(self, snapshot: Optional[TritonSnapshot] = None,
                 gate_modes: Callable[[], tuple] = tuple) -> None:
        import builtins
        import dis
        import gc
        import math
        import signal
        import threading

        import triton.language as tl
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.interpreter import GridExecutor, InterpretedFunction
        from triton.runtime.jit import ConstexprFunction

        self._snap = snapshot or TritonSnapshot()
        self._frames = launch_frames.ForeignFrames()
        # the modules an import inside a launch finds (Triton's, numpy's and those the snapshot
        # compares), and the import system's hooks, as they were before the solution's import
        watched = {id(m) for m in self._snap.modules()}
        self._modules = [(n, m) for n, m in list(sys.modules.items()) if id(m) in watched]
        self._meta_path, self._path_hooks = list(sys.meta_path), list(sys.path_hooks)
        self._dis = dis.get_instructions
        self._parsed: Dict[int, Tuple[Any, list]] = {}   # id(code) -> (code, its instructions)
        self._builtins, self._tl = builtins, tl
        self._builtins_dict = vars(builtins)
        # the functions a body may call from builtins and math, as they were at the gate's start
        self._safe_builtins = {n: getattr(builtins, n) for n in self.SAFE_BUILTINS}
        self._math_fns = {n: v for n, v in vars(math).items() if isinstance(v, types.BuiltinFunctionType)}
        self._Interpreted, self._GridExecutor = InterpretedFunction, GridExecutor
        import numpy

        self._np_errstate, self._np_geterrcall = numpy.errstate, numpy.geterrcall
        self._Constexpr, self._wrappers = ConstexprFunction, (Autotuner, Heuristics)
        # what may run code inside a launch besides the kernel, as it was before the solution's
        # import: torch function modes (only the gate's own), gc callbacks, signal handlers, threads
        self._gate_modes = gate_modes
        self._gc, self._threading = gc, threading
        self._gc_callbacks = [id(c) for c in gc.callbacks]
        self._signal = signal
        self._signals = _signal_handlers(signal)
        self._threads = set(sys._current_frames())
        # audit hooks cannot be listed or removed: refuse every later one (a RuntimeError from a
        # hook on the "sys.addaudithook" event keeps the new hook out) and remember the attempt
        self._audit_attempts: List[str] = []
        attempts = self._audit_attempts

        def refuse_audit_hooks(event, _args):
            if event == "sys.addaudithook":
                attempts.append(event)
                raise RuntimeError("kernelwright: no audit hooks in a worker")

        sys.addaudithook(refuse_audit_hooks)

    # -- the launch ---------------------------------------------------------------------------
    def run(self, fn_self, args: tuple, kwargs: Dict[str, Any], note: Callable[[str], None],
            frames: bool = True):
        """Launch ``fn_self`` as ``InterpretedFunction.run`` does, but run the function this
        check read: ``note(why)`` first when it is not one a GPU could run.  ``frames``: check
        every Python frame that starts inside the launch (``launch_frames``; the first foreign
        one is noted and stops the launch with ``launch_frames.ForeignCode``)."""
        kernel = self._interpreted(fn_self)
        if kernel is None:
            note("not a Triton kernel the interpreter launches")
            return None
        fn = kernel.rewrite()
        grid = kwargs.pop("grid")
        kwargs.pop("warmup", None)
        if callable(grid):
            # the solution's grid function runs here, before the check, never inside the launch
            # (GridExecutor would call it after the check, with the interpreter's patches on)
            grid = grid(_grid_arguments(kernel.fn, args, kwargs))
        grid = _exact_grid(grid)    # exact ints: no object of the solution's in range() later
        why = self._launch_problem(kernel, fn, args, dict(kwargs, grid=grid)) or self._hooks_problem()
        if why is not None:
            note(why)
        enabled = self._gc.isenabled()
        self._gc.disable()          # no finalizer or gc callback of the solution's mid-launch
        executor = functools.partial(self._GridExecutor, fn, kernel.arg_names, grid, kernel.pre_run_hooks)
        try:
            # numpy's error callback is a hook the interpreter's arithmetic would call; every
            # Python frame that starts in the launch is checked (launch_frames)
            with self._np_errstate(all="ignore", call=None):
                result = self._frames.watch(lambda: executor()(*args, **kwargs)) if frames \
                    else executor()(*args, **kwargs)
        except Exception:
            if self._frames.found is not None:
                note(f"{getattr(kernel, '__name__', '?')}: {self._frames.found}")
            raise
        finally:
            if enabled:
                self._gc.enable()
        # read again before the solution's code runs: what was planted inside the launch and
        # would be taken away after it (a hook that ran mid-launch) is still there now
        after = self._snap.changed() or self._hooks_problem()
        if after is not None and why is None:
            note(f"{getattr(kernel, '__name__', '?')}: during the launch: {after}")
        return result

    def _hooks_problem(self) -> Optional[str]:
        """What could run the solution's code inside the launch after this check, besides the
        kernel: a profile or trace function, a torch dispatch mode or a function mode not the
        gate's own, a gc callback or signal handler added since the gate started, a Python
        thread started since then (but multiprocessing's own), an audit hook tried, numpy's error
        callback set."""
        if sys.getprofile() is not None or sys.gettrace() is not None:
            return "a profile or trace function is set (it would run inside the launch)"
        if torch._C._len_torch_dispatch_stack():
            return "a torch dispatch mode is on (it would run inside the launch)"
        allowed = self._gate_modes()
        if any(type(m) not in allowed for m in torch.overrides._get_current_function_mode_stack()):
            return "a torch function mode of the solution's is on (it would run inside the launch)"
        if [id(c) for c in self._gc.callbacks] != self._gc_callbacks:
            return "gc.callbacks changed since the gate started"
        if _signal_handlers(self._signal) != self._signals:
            return "a signal handler changed since the gate started (it would run inside the launch)"
        allowed = self._threads | {self._threading.get_ident()}
        sharer = getattr(sys.modules.get("multiprocessing.resource_sharer"), "_resource_sharer", None)
        if getattr(sharer, "_thread", None) is not None:
            allowed = allowed | {sharer._thread.ident}    # multiprocessing's descriptor handover
        if set(sys._current_frames()) - allowed:
            return "a Python thread started after the gate runs beside the launch"
        from kernelwright.gate.integrity import foreign_thread_code
        foreign = foreign_thread_code()
        if foreign is not None:     # the sharer's thread running a callback of the solution's
            return f"another thread runs code made after the gate started, beside the launch: {foreign}"
        if self._audit_attempts:
            return "the solution tried to add an audit hook (it would run inside the launch)"
        problem = self._imports_problem()
        if problem:
            return problem
        if self._np_geterrcall() is not None:
            return "numpy's error callback is set (the interpreter's arithmetic would call it inside the launch)"
        return None

    def _imports_problem(self) -> Optional[str]:
        """What an import inside the launch would find other than at the gate's start: a module
        of the snapshot's (Triton's, numpy's, ...) missing from ``sys.modules`` or replaced there,
        a finder or path hook added, removed or replaced."""
        modules = sys.modules
        for name, module in self._modules:
            if modules.get(name) is not module:
                return f"sys.modules[{name!r}] is not the module the gate started with"
        for hooks, before, label in ((sys.meta_path, self._meta_path, "sys.meta_path"),
                                     (sys.path_hooks, self._path_hooks, "sys.path_hooks")):
            if len(hooks) != len(before) or any(a is not b for a, b in zip(hooks, before)):
                return f"{label} changed since the gate started (an import inside the launch would run it)"
        return None

    def check(self, fn_self, args: tuple, kwargs: Dict[str, Any]) -> Optional[str]:
        """None if the launch would run what a GPU kernel could, else why not (one line)."""
        kernel = self._interpreted(fn_self)
        if kernel is None:
            return "not a Triton kernel the interpreter launches"
        return self._launch_problem(kernel, kernel.rewrite(), args, kwargs)

    def _interpreted(self, fn_self):
        """The ``InterpretedFunction`` (exactly that class) under ``fn_self``, through exactly
        Triton's ``Autotuner`` and ``Heuristics`` wrappers, their ``fn`` read with ``vars()``;
        None otherwise."""
        inner = fn_self
        for _ in range(8):
            if type(inner) is self._Interpreted:
                return inner
            if type(inner) not in self._wrappers:
                return None
            inner = vars(inner).get("fn")
        return None

    def _launch_problem(self, kernel, fn, args, kwargs) -> Optional[str]:
        name = getattr(kernel, "__name__", "?")
        changed = self._snap.changed()
        if changed:
            return f"{name}: {changed} was changed after the gate started (the interpreter or a kernel's body runs it)"
        if kernel.pre_run_hooks:
            return f"{name} has Triton pre-run hooks (host code inside the launch)"
        py = kernel.fn
        defaults = list(getattr(py, "__defaults__", None) or ()) + list((getattr(py, "__kwdefaults__", None) or {}).values())
        for value in list(args) + [v for k, v in kwargs.items() if k not in ("grid", "warmup")] + defaults:
            problem = self._argument_problem(value)
            if problem:
                return f"{name}: an argument is {problem}"
        return self._function_problem(kernel, fn, set())

    def _argument_problem(self, value, depth: int = 0) -> Optional[str]:
        """Why a launch argument (or a parameter's default) is not one a GPU kernel takes: exact
        types only -- a subclass of int, tuple or tensor would bring its own methods."""
        tl = self._tl
        if type(value) in _PLAIN or type(value) in (torch.Tensor, torch.dtype):
            return None
        if type(value) is tl.constexpr:
            return self._argument_problem(value.value, depth + 1) if depth < 4 else "a nested constexpr"
        if type(value) in (tuple, list) and depth < 4:
            return next((p for p in (self._argument_problem(v, depth + 1) for v in value) if p), None)
        if self._snap.owns(value) and isinstance(value, tl.dtype):
            return None
        if self._interpreted(value) is not None:
            return self._function_problem(self._interpreted(value), self._interpreted(value).rewrite(), set())
        if self._snap.owns(value):
            return self._triton_object_problem(value, lambda v: self._argument_problem(v, depth + 1))
        return f"a {type(value).__name__}, not a tensor, a scalar, a dtype, a Triton object or a jit function"

    # -- one function's bytecode -----------------------------------------------------------------
    def _function_problem(self, kernel, fn, visiting: set) -> Optional[str]:
        if id(fn) in visiting:
            return None      # Triton's own jit functions (tl.sum, ...) are read too: their
                             # rewritten function is what runs, and a solution can plant one
        visiting.add(id(fn))
        # read on every launch: the globals a body names are looked up as they are now (a solution
        # may rebind one between launches); only the bytecode's parse is kept, by code object
        problem = self._read(kernel, fn)
        if problem:
            return problem
        problem = self._globals_problem(kernel, fn)
        if problem:
            return problem
        self._frames.allow(fn)      # the body read here may run inside the launch
        # the interpreter's reductions and scans call a combine function's own Python function
        # (``combine_fn.fn``), not its rewritten body: that one is read as a body too
        raw = vars(kernel).get("fn") if type(kernel) is self._Interpreted else None
        if type(raw) is types.FunctionType and raw is not fn:
            problem = self._read(kernel, raw)
            if problem:
                return problem
            self._frames.allow(raw)
        for callee in self._jit_globals(fn):
            problem = self._function_problem(callee, callee.rewrite(), visiting)
            if problem:
                return problem
        return None

    def _read(self, kernel, fn) -> Optional[str]:
        name = getattr(kernel, "__name__", "?")
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            return f"{name} runs no Python function the gate can read"
        if any(isinstance(c, types.CodeType) for c in code.co_consts):
            return f"{name} holds nested code (a lambda, a comprehension or an inner function)"
        problem = self._signature_problem(fn)
        if problem:
            return f"{name} {problem}"
        chain: Optional[List[Any]] = None      # [object, dotted name] of a global being followed
        for ins in self._instructions(code):
            op = ins.opname
            if op.startswith("IMPORT"):
                return f"{name} imports {ins.argval}"
            if op in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_NAME"):
                problem = self._end_chain(chain)
                if problem:
                    return f"{name} {problem}"
                chain = [self._lookup(fn, ins.argval, op), ins.argval] if op != "LOAD_DEREF" or \
                    ins.argval in code.co_freevars else None
                continue
            if op in self._LOAD_ATTR:
                attr = ins.argval
                if attr == "handle" or attr.startswith("__"):
                    return f"{name} reads .{attr}, which no GPU kernel has"
                if chain is not None and (isinstance(chain[0], types.ModuleType) or self._snap.owns(chain[0])):
                    chain = [_attribute(chain[0], attr), f"{chain[1]}.{attr}"]
                    continue
                if chain is None and attr not in self._snap.value_attrs:
                    return f"{name} reads .{attr}, not an attribute of Triton's values"
                if chain is not None:
                    problem = self._end_chain(chain)
                    if problem:
                        return f"{name} {problem}"
                    chain = None
                continue
            problem = self._end_chain(chain)
            if problem:
                return f"{name} {problem}"
            chain = None
        problem = self._end_chain(chain)
        return f"{name} {problem}" if problem else None

    def _globals_problem(self, kernel, fn) -> Optional[str]:
        """Why a value of the globals the interpreter walks at a launch could run the solution's
        code there, named or not by the body: ``_patch_lang`` asks ``inspect.ismodule`` of every
        value of the rewritten function's and the jit function's module (an ``isinstance`` that
        reads ``__class__`` of anything but a module) and compares each module with ``==``."""
        spaces = [fn.__globals__]
        py = vars(kernel).get("fn") if type(kernel) is self._Interpreted else None
        if type(py) is types.FunctionType and py.__globals__ is not fn.__globals__:
            spaces.append(py.__globals__)
        for space in spaces:
            for name, value in list(space.items()):
                why = _lookup_hook(value)
                if why:
                    return f"{getattr(kernel, '__name__', '?')}'s module holds {name}, {why}"
        return None

    def _signature_problem(self, fn) -> Optional[str]:
        """Why what the interpreter reads off ``fn`` besides its code inside a launch could run
        the solution's code: attributes of its own (``__signature__``, which ``inspect``'s
        argument spec returns as it is, ``__wrapped__``), builtins other than the interpreter's
        (a module whose ``__builtins__`` maps ``len`` elsewhere: the rewritten body, made by
        ``exec`` into that module's globals, looks its names up there), a default value a launch
        argument could not be (the rewriter runs the ``def`` again, so defaults are evaluated
        anew), an annotation other than a string, ``int``/``float``/``bool`` or one of Triton's
        classes and dtypes (``GridExecutor`` turns each into a string)."""
        own = vars(fn)
        if own:
            return f"carries attributes of its own ({', '.join(sorted(map(str, own))[:3])})"
        if fn.__builtins__ is not self._builtins_dict or type(fn.__globals__) is not dict:
            return "runs with builtins or globals of its own (its module's __builtins__ replaced)"
        for value in list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values()):
            problem = self._argument_problem(value)
            if problem:
                return f"has a default value that is {problem}"
        notes = fn.__annotations__
        if type(notes) is not dict:
            return "has annotations that are not a dict"
        for key, value in notes.items():
            if type(key) is not str or not (type(value) is str or any(value is t for t in (int, float, bool))
                                             or (isinstance(value, type) and self._snap.owns(value))
                                             or (isinstance(value, self._tl.dtype) and self._snap.owns(value))):
                return f"has an annotation that is a {type(value).__name__}, not a string or a Triton type"
        return None

    def _instructions(self, code) -> list:
        """``dis`` instructions of a code object, parsed once per code object."""
        entry = self._parsed.get(id(code))
        if entry is None or entry[0] is not code:
            entry = self._parsed[id(code)] = (code, list(self._dis(code)))
        return entry[1]

    def _lookup(self, fn, name: str, op: str) -> Any:
        code = fn.__code__
        if op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and name in code.co_freevars and fn.__closure__:
            try:
                return fn.__closure__[code.co_freevars.index(name)].cell_contents
            except ValueError:
                return _MISSING
        scope = fn.__globals__
        if name in scope:
            return scope[name]
        return getattr(self._builtins, name, _MISSING)

    def _end_chain(self, chain) -> Optional[str]:
        """Why the object a chain of global attributes ended in is not one a kernel may use."""
        if chain is None:
            return None
        value, dotted = chain
        tl = self._tl
        if value is _MISSING:
            return f"names {dotted}, which is not defined"
        if type(value) in _PLAIN or (isinstance(value, tl.dtype) and self._snap.owns(value)):
            return None
        if type(value) is tl.constexpr:
            return self._end_chain([value.value, f"{dotted}.value"])
        if isinstance(value, types.ModuleType):
            root = value.__name__.split(".")[0]
            return None if root in ("triton", "math") else f"uses the module {dotted} itself"
        if self._interpreted(value) is not None:
            return None          # its body is read by _jit_globals
        if self._snap.owns(value):
            return self._triton_object_problem(value, lambda v: self._global_value_problem(v, f"{dotted}[...]"))
        if any(value is f for f in self._safe_builtins.values()) or any(value is f for f in self._math_fns.values()):
            return None
        return f"uses {dotted}, a {type(value).__name__} (a GPU kernel cannot call Python)"

    def _global_value_problem(self, value, dotted: str) -> Optional[str]:
        """A value inside a global ``tl.tuple``: judged as a global, a jit function's body read."""
        kernel = self._interpreted(value)
        if kernel is not None:
            return self._function_problem(kernel, kernel.rewrite(), set())
        return self._end_chain([value, dotted])

    def _triton_object_problem(self, value, judge: Callable[[Any], Optional[str]]) -> Optional[str]:
        """Why an object of Triton's (``TritonSnapshot.owns``) is not one a kernel may hold: only
        listed kinds pass -- Triton's classes and functions, dtypes, enum members, a ``tl.tuple``
        whose values ``judge`` passes one by one, and a ``constexpr_function`` whose ``fn`` (read
        with ``vars()``) is a plain function, Triton's or one whose body passes a kernel's rules."""
        tl, kind = self._tl, type(value)
        if isinstance(value, type) or kind in _FUNCTION_TYPES or isinstance(value, tl.dtype) \
                or "__members__" in vars(kind):
            return None
        if kind is tl.tuple:
            values = vars(value).get("values")
            if type(values) is not list:
                return "a tl.tuple without a list of values"
            return next((p for p in map(judge, values) if p), None)
        if kind is self._Constexpr:
            fn = vars(value).get("fn")
            if type(fn) is not types.FunctionType:
                return f"a constexpr_function around a {type(fn).__name__}, not a function"
            if self._snap.owns(fn):
                return None
            # a constexpr_function of the solution's: under the interpreter it runs on every launch
            # with the kernel's values, so its body, and the jit functions it names, are held to a
            # kernel's rules too
            return self._function_problem(fn, fn, set())
        return f"a Triton {kind.__name__}, not a kind of Triton object a kernel holds"

    def _jit_globals(self, fn):
        """The jit functions ``fn`` names, by global name or a chain of module attributes."""
        chain = None
        for ins in self._instructions(fn.__code__):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF"):
                if chain is not None and self._interpreted(chain) is not None:
                    yield self._interpreted(chain)
                chain = self._lookup(fn, ins.argval, ins.opname)
            elif ins.opname in self._LOAD_ATTR and isinstance(chain, types.ModuleType):
                chain = getattr(chain, ins.argval, None)
            else:
                if chain is not None and self._interpreted(chain) is not None:
                    yield self._interpreted(chain)
                chain = None
        if chain is not None and self._interpreted(chain) is not None:
            yield self._interpreted(chain)


_MISSING = object()
_METHOD_TYPES = (types.MethodType, staticmethod, classmethod)
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType) + _METHOD_TYPES


def _lookup_hook(value) -> Optional[str]:
    """Why reading ``value.__class__`` or comparing ``value`` as a module could run Python code
    (a type, or a class of its MRO, that defines ``__class__`` or a Python ``__getattribute__``; a
    module subclass with a Python ``__eq__``); None.  Read through ``type``'s own descriptors, so
    no metaclass answers for the class."""
    kind = type(value)
    module = issubclass(kind, types.ModuleType)
    for k in _TYPE_MRO(kind):
        space = _TYPE_DICT(k)
        if k is not object and "__class__" in space:
            return f"a {kind.__name__}, whose type defines __class__"
        if type(space.get("__getattribute__")) is types.FunctionType:
            return f"a {kind.__name__}, whose type reads its attributes in Python (__getattribute__)"
        if module and type(space.get("__eq__")) is types.FunctionType:
            return f"a module of type {kind.__name__}, which compares in Python (__eq__)"
    return None


def _owner_name(obj) -> str:
    """How ``changed`` names a watched namespace: a class's qualified name, else its ``__name__``."""
    if isinstance(obj, type):
        return obj.__qualname__
    return str(vars(obj).get("__name__", type(obj).__name__))


def _table_change(table: dict, before: Dict[Any, Tuple[int, Any]]) -> Any:
    """The first key of ``table`` whose callable value was replaced or removed since ``before``
    ({key: (id, value)} of its callable items), or that now holds a callable it did not; None."""
    for key, (_, value) in before.items():
        if table.get(key, _MISSING) is not value:
            return key
    if len(table) != len(before):
        for key, value in list(table.items()):
            if key not in before and callable(value):
                return key
    return None


def _exact_grid(grid) -> Tuple[int, ...]:
    """A launch grid as a tuple of at most three exact ints (``operator.index`` of each entry,
    run here, before the check).

    Raises:
        TypeError: an entry is not an integer.
    """
    import operator

    values = tuple(grid) if type(grid) in (tuple, list) else (grid,)
    out = tuple(operator.index(g) for g in values)
    if len(out) > 3 or any(type(g) is not int for g in out):
        raise TypeError(f"a launch grid of at most three integers, not {values!r}"[:200])
    return out


def _signal_handlers(signal) -> Dict[int, int]:
    """{signal number: id of its handler} for every signal whose handler Python can read."""
    out = {}
    for n in signal.valid_signals():
        try:
            out[int(n)] = id(signal.getsignal(n))
        except (OSError, ValueError):
            continue
    return out


def _grid_arguments(py_fn, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The launch's arguments by parameter name, defaults included, as a grid function reads
    them (``meta["BLOCK"]``); the values as passed (the interpreter would pass its own
    conversions of tensors and integers)."""
    import inspect

    names = inspect.getfullargspec(py_fn).args
    return inspect.getcallargs(py_fn, *args, **{k: v for k, v in kwargs.items() if k in names})


def _namespace(obj) -> Dict[str, Tuple[int, Any]]:
    """``vars(obj)`` as {name: (id of the value, the value)}: kept to be compared by identity
    and, for Triton's leaked patches, put back (``TritonSnapshot._namespace_change``)."""
    lazy = _lazy_names(obj)
    return {n: (id(v), v) for n, v in list(vars(obj).items()) if n not in lazy}


def _lazy_names(obj) -> frozenset:
    """The names left out of ``obj``'s comparison: ``_LAZY`` everywhere, and on ``tl.tensor``
    what the interpreter's launch patches onto it (``_patch_lang_tensor``)."""
    import triton.language as tl

    return _LAZY | _TENSOR_PATCHED if obj is tl.tensor else _LAZY


def _data(value) -> bool:
    """Whether ``value`` is plain data an instance of Triton's may rebind as it runs (scalars,
    strings, tuples/lists/dicts of them, numpy arrays): nothing callable, no object with
    methods of its own."""
    import numpy

    if type(value) in _PLAIN or type(value) is numpy.ndarray or isinstance(value, numpy.generic):
        return True
    if type(value) in (tuple, list):
        return all(_data(v) for v in value)
    if type(value) is dict:
        return all(_data(k) and _data(v) for k, v in value.items())
    return False


def _attribute(obj, name: str) -> Any:
    """``getattr`` that answers ``_MISSING`` for any failure (``tl.tuple.__getattr__`` raises
    ValueError for a name that is not one of its fields)."""
    try:
        return getattr(obj, name)
    except Exception:
        return _MISSING
_PLAIN = (bool, int, float, str, type(None))     # constants, by exact type
# Triton's caches of callables, filled as it runs: the interpreter's rewritten functions (what a
# launch runs is read from it at every launch, JitBodyCheck._function_problem)
_GROWING_TABLES = frozenset({("InterpretedFunction", "rewritten_fn")})
_TYPE_MRO = type.__dict__["__mro__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__
# the share of launches whose every Python frame is checked (launch_frames), drawn per launch
# from os.urandom: it costs 2.6-4x the interpreter's time where it is on (Python 3.11), so
# checking all of them would double CI; the known ways in are closed at every launch besides
FRAME_WATCH_SHARE = 0.25
# left out of the comparison: created on first access (Python 3.10+), the registry a module gets
# when a warning is issued from its code, and copyreg's cache of a class's slot names (pickling); on tl.tensor also what the interpreter's launch
# patches onto it and restores (triton.runtime.interpreter._patch_lang_tensor)
_LAZY = frozenset({"__annotations__", "__warningregistry__", "__slotnames__"})
_TENSOR_PATCHED = frozenset({"__index__", "__bool__", "__repr__", "__str__", "T"})


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]
