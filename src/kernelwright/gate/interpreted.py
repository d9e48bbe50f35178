"""The CPU gate's hold on Triton's interpreter (``TRITON_INTERPRET=1``), where a launch is ordinary
Python in the solution's own process.  Three pieces, installed by the worker's ``LaunchCounter``
before any solution code runs:

* ``WriteAblation``: the provenance ablation call runs every launch with Triton's stores dropped
  (and its atomics into the outputs), so outputs that still come out right were written by
  something else (``evaluate._check_ablation``: HOST_COMPUTE).
* ``triton_code_test``: whether a code object is Triton's own, so that the host-op recorder can
  leave out the interpreter's own argument handling inside a launch and nothing else.
* ``JitBodyCheck``: every launched kernel's body calls only what a GPU kernel can (Triton's
  language, jit functions, ``math``, methods of its values): a ``@triton.jit`` body that calls a
  Python helper, or numpy on the interpreter's handles, runs under the interpreter but is not a
  GPU kernel.

Rules and the attacks they answer: docs/gate.md, section 2 (row 6) and section 3 (item 10).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

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


def triton_code_test() -> Callable[[Any], bool]:
    """``test(code)``: whether a code object belongs to a ``triton`` module loaded now (a
    function, a class's method or property, or code nested in one, defined in a file under
    Triton's package folder), by identity: a solution's function compiled with a Triton file
    name, or a module it registers later, is not one.  Walked once, at install."""
    root = os.path.dirname(importlib.import_module("triton").__file__) + os.sep
    importlib.import_module("triton.runtime.interpreter")
    importlib.import_module("triton.tools.tensor_descriptor")
    codes: set = set()
    keep: List[Any] = []    # the code objects themselves: ids stay unique while they live

    def add_code(code) -> None:
        if id(code) in codes or not code.co_filename.startswith(root):
            return
        codes.add(id(code))
        keep.append(code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add_code(const)

    def add_object(obj, depth: int = 0) -> None:
        fn = getattr(obj, "__func__", obj)          # staticmethod / classmethod
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType):
            add_code(code)
        elif isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    add_object(f, depth)
        elif isinstance(obj, type) and depth < 3:
            for member in list(vars(obj).values()):
                add_object(member, depth + 1)

    for name, module in list(sys.modules.items()):
        if name == "triton" or name.startswith("triton."):
            for obj in list(vars(module).values()):
                add_object(obj)
    return lambda code: id(code) in codes


class JitBodyCheck:
    """Whether an interpreted launch's kernel is written as a GPU kernel can be: under
    ``TRITON_INTERPRET=1`` a ``@triton.jit`` body is ordinary Python, so it could call a helper
    that computes with torch or numpy, or read the interpreter's ``handle`` arrays; none of that
    lowers for a GPU.  Read from the body's source (``ast``), per function, and from the jit
    functions it calls, recursively:

    * a call must go to a jit function (an ``InterpretedFunction``, or one passed as an argument
      at launch), a callable of a ``triton`` module (``tl.load``, ``triton.cdiv``, a name
      imported from one), a function of ``math``, a method of a value the body holds
      (``x.to(...)``), or one of ``SAFE_BUILTINS``;
    * no ``handle`` attribute, no dunder attribute.

    ``check`` returns None or why not (one line).  Not seen: a Triton builtin made to call the
    solution back (its ops are still recorded as host ops: ``HostOpRecorder``)."""

    SAFE_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "print", "isinstance",
                               "tuple", "zip", "enumerate", "abs", "divmod", "pow", "round", "reversed"})
    SAFE_MODULES = ("triton", "math")

    def __init__(self) -> None:
        self._seen: Dict[Any, Tuple[Optional[str], Tuple[str, ...]]] = {}

    def check(self, fn_self, args: tuple, kwargs: Dict[str, Any]) -> Optional[str]:
        """None if the launched kernel's body, and every jit function it reaches, passes."""
        return self._check(self._python(fn_self), args, kwargs, set())

    @staticmethod
    def _python(fn) -> Any:
        """The Python function under an ``InterpretedFunction`` (through autotuner / heuristics
        wrappers, whose ``fn`` is the next one in)."""
        while not callable(getattr(fn, "rewrite", None)) and hasattr(fn, "fn"):
            fn = fn.fn
        return getattr(fn, "fn", fn)

    @staticmethod
    def _is_jit(value) -> bool:
        from triton.runtime.interpreter import InterpretedFunction

        while not isinstance(value, InterpretedFunction) and hasattr(value, "fn") and hasattr(value, "run"):
            value = value.fn
        return isinstance(value, InterpretedFunction)

    def _check(self, py, args, kwargs, visiting: set) -> Optional[str]:
        if py in visiting:
            return None
        visiting.add(py)
        if py not in self._seen:
            self._seen[py] = self._read(py)
        problem, called_params = self._seen[py]
        if problem:
            return problem
        reached = list(self._reached(py))
        if called_params and args is not None:
            import inspect

            try:
                bound = inspect.signature(py).bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                                      if k in inspect.signature(py).parameters})
            except TypeError as exc:
                return f"{py.__name__}: {exc}"
            for name in called_params:
                value = bound.arguments.get(name)
                if not self._is_jit(value):
                    return f"{py.__name__} calls its argument {name}, which is not a jit function"
                reached.append(self._python(value))
        for callee in reached:
            problem = self._check(callee, None, {}, visiting)
            if problem:
                return problem
        return None

    def _reached(self, py):
        """The jit functions ``py``'s body calls by global name or module attribute."""
        import ast

        tree = self._tree(py)
        if tree is None:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                value = self._resolve(py, node.func, self._locals(tree))
                if value is not None and value is not _LOCAL and self._is_jit(value):
                    yield self._python(value)

    @staticmethod
    def _tree(py):
        import ast
        import inspect
        import textwrap

        try:
            return ast.parse(textwrap.dedent(inspect.getsource(py)))
        except (OSError, TypeError, SyntaxError):
            return None

    @staticmethod
    def _locals(tree) -> set:
        import ast

        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
        return names

    def _resolve(self, py, func, local_names: set) -> Any:
        """What a call target refers to: ``_LOCAL`` for a value the body holds (a local or a
        parameter, or a method of one), the object for a global name or a chain of module
        attributes, ``_MISSING`` where the chain leaves the modules or cannot be followed."""
        import ast

        chain = []
        node = func
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            # a method of a value computed in the body (``tl.load(p).to(...)``); whatever globals
            # that value came from are checked where they are named
            return _LOCAL if chain else _MISSING
        if node.id in local_names:
            return _LOCAL
        value = _global(py, node.id)
        for attr in reversed(chain):
            if not isinstance(value, types.ModuleType):
                return _MISSING
            value = getattr(value, attr, _MISSING)
        return value

    def _read(self, py) -> Tuple[Optional[str], Tuple[str, ...]]:
        """(problem or None, names of parameters the body calls) of one function's source."""
        import ast

        tree = self._tree(py)
        name = getattr(py, "__name__", "?")
        if tree is None:
            return f"{name}: its source cannot be read", ()
        fn_def = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        params = {a.arg for a in fn_def.args.args + fn_def.args.kwonlyargs} if fn_def else set()
        local_names = self._locals(tree)
        body = fn_def.body if fn_def else tree.body
        called_params = []
        for node in (n for stmt in body for n in ast.walk(stmt)):
            problem = None
            if isinstance(node, ast.Attribute) and (node.attr == "handle" or node.attr.startswith("__")):
                problem = f"reads .{node.attr}, which no GPU kernel has"
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local_names:
                problem = self._global_problem(_global(py, node.id))
                problem = problem and f"uses the global {node.id}: {problem}"
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in params:
                    called_params.append(node.func.id)
                    continue
                problem = self._callee_problem(node.func, self._resolve(py, node.func, local_names))
                problem = problem and f"calls {ast.unparse(node.func)}: {problem}"
            if problem:
                return f"{name} {problem}", ()
        return None, tuple(dict.fromkeys(called_params))

    def _global_problem(self, value) -> Optional[str]:
        """Why a global a jit body names is not one a GPU kernel can use (None: it can)."""
        import triton.language as tl

        if value is _MISSING:
            return "not defined"
        if isinstance(value, types.ModuleType):
            root = value.__name__.split(".")[0]
            return None if root in self.SAFE_MODULES else "a module a kernel cannot call into"
        if value is None or isinstance(value, (bool, int, float, str, tl.constexpr, tl.dtype)):
            return None
        if self._is_jit(value) or value is getattr(builtins_module(), getattr(value, "__name__", ""), _MISSING):
            return None
        module = (getattr(value, "__module__", None) or "").split(".")[0]
        if module in self.SAFE_MODULES and not _user_constexpr_function(value):
            return None
        return f"a {type(value).__name__}, not a constant, a Triton object or a jit function"

    def _callee_problem(self, func, value) -> Optional[str]:
        import ast

        if value is _LOCAL:
            return None if isinstance(func, ast.Attribute) else "a value it holds, not a function a kernel can call"
        if value is _MISSING:
            return "a target that cannot be followed to a module's function"
        if self._is_jit(value):
            return None
        if getattr(value, "__name__", None) in self.SAFE_BUILTINS and value is getattr(builtins_module(), value.__name__, None):
            return None
        module = (getattr(value, "__module__", None) or "").split(".")[0]
        if module in self.SAFE_MODULES and not _user_constexpr_function(value):
            return None
        return "a Python function (a GPU kernel cannot call Python)"


_LOCAL = object()
_MISSING = object()


def builtins_module():
    import builtins

    return builtins


def _global(py, name: str) -> Any:
    """A name as the function's body would see it: a closure cell, a global, a builtin."""
    code = getattr(py, "__code__", None)
    if code is not None and name in code.co_freevars and py.__closure__:
        try:
            return py.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return _MISSING
    scope = getattr(py, "__globals__", {})
    if name in scope:
        return scope[name]
    return getattr(builtins_module(), name, _MISSING)


def _user_constexpr_function(value) -> bool:
    """A ``triton.constexpr_function`` wrapper around a function not of a Triton module: under the
    interpreter it runs on every launch with the kernel's values."""
    inner = getattr(value, "fn", None)
    return inner is not None and not (getattr(inner, "__module__", "") or "").startswith("triton")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]
