"""The built-in definitions (the three contest workloads), their references, workload sets,
tolerances and roofline models.

``get(name)`` accepts the full definition name, its short alias (``moe``, ``indexer``,
``attention``) and the reduced-size ``<name>__quick`` variants.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import dataclasses
from pathlib import Path

from kernelwright.definitions.base import (QUICK_SUFFIX, BuiltinDefinition, RooflineWork, Tolerance, base_name,
                                           is_quick, quick_name)


class UnknownDefinition(KeyError):
    """No built-in definition has that name."""

    def __str__(self) -> str:  # one line, no quotes around the message
        return self.args[0]


def _registry() -> Dict[str, BuiltinDefinition]:
    from kernelwright.definitions import demo_rmsnorm, dsa_attention, dsa_indexer, moe_fp8

    builtins = (moe_fp8.BUILTIN, dsa_indexer.BUILTIN, dsa_attention.BUILTIN, demo_rmsnorm.BUILTIN)
    return {b.name: b for b in builtins}


def all_builtins(include_demo: bool = True) -> List[BuiltinDefinition]:
    """Every built-in definition; the contest three first, then the demo one."""
    found = list(_registry().values())
    return found if include_demo else [b for b in found if "demo" not in b.definition.tags]


def get(name: str) -> BuiltinDefinition:
    """Look up a built-in definition.  Raises UnknownDefinition with the known names."""
    reg = _registry()
    quick = is_quick(name)
    base = base_name(name)
    found = reg.get(base) or next((b for b in reg.values() if b.short == base), None)
    if found is None:
        known = ", ".join(sorted(list(reg) + [b.short for b in reg.values()]))
        raise UnknownDefinition(f"unknown definition {name!r} (known: {known})")
    return found.quick_variant() if quick else found


def resolve(locator: str) -> BuiltinDefinition:
    """The definition a locator names (``BuiltinDefinition.locator``; what the worker resolves):

    * a built-in name or alias, optionally ending in ``__quick``;
    * ``package.module:ATTRIBUTE`` naming a BuiltinDefinition object (how user definitions are
      plugged in), optionally ending in ``__quick``;
    * ``file:<path>#sha256=<digest>``: a FlashInfer-Bench definition JSON (``definitions.generic``);
    * any of these followed by ``|blobs=<root>``: workloads' safetensors inputs read under that
      root (``definitions.fixed``).

    Raises UnknownDefinition (one line; a definition module's SyntaxError names its file and line)."""
    from kernelwright.definitions import fixed, generic

    inner, blobs = fixed.split_locator(locator)
    if inner.startswith(generic.FILE_PREFIX):
        from kernelwright.trace.jsonio import DataFileError

        try:
            return generic.from_locator(inner, blob_root=blobs)
        except DataFileError as exc:
            raise UnknownDefinition(str(exc)) from exc
    if blobs is not None:
        return fixed.with_fixed_inputs(resolve(inner), blobs)
    if ":" in locator:
        import importlib

        if is_quick(locator):
            return resolve(base_name(locator)).quick_variant()
        module_name, _, attr = locator.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownDefinition(f"cannot load definition {locator!r}: {exc}") from exc
        except Exception as exc:   # the module itself is broken: say where
            raise UnknownDefinition(f"cannot load definition {locator!r}: {_where(exc)}") from exc
        if not isinstance(found, BuiltinDefinition):
            raise UnknownDefinition(f"{locator!r} is not a BuiltinDefinition")
        return found if found.ref else dataclasses.replace(found, ref=locator)
    return get(locator)


def _where(exc: BaseException) -> str:
    """One line for an exception raised while importing a user's definition module: the file and
    line in the user's code (every frame outside the Python installation and kernelwright)."""
    import os
    import sysconfig
    import traceback

    from kernelwright.diagnostics import exception_line

    skip = tuple(os.path.realpath(p) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                os.path.dirname(os.path.dirname(__file__))})
    files = {f.filename for f in traceback.extract_tb(exc.__traceback__)}
    if isinstance(exc, SyntaxError) and exc.filename:
        files.add(exc.filename)
    mine = {f: f for f in files if f and not f.startswith("<") and not os.path.realpath(f).startswith(skip)}
    return exception_line(exc, mine)


def same_spec(a, b) -> Optional[str]:
    """None when two Definitions agree on what the gate judges (axes, inputs and outputs with
    their shapes and dtypes), else one line saying the first difference."""
    for part in ("axes", "inputs", "outputs"):
        mine = {k: v.model_dump(exclude={"description"}) for k, v in getattr(a, part).items()}
        theirs = {k: v.model_dump(exclude={"description"}) for k, v in getattr(b, part).items()}
        if mine != theirs:
            names = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            return f"{part} differ ({', '.join(names[:4])})"
    return None


def get_or_none(name: str) -> Optional[BuiltinDefinition]:
    """``get(name)``, or None for a name that is no built-in's."""
    try:
        return get(name)
    except UnknownDefinition:
        return None


def adopt(definition, source=None, workloads=None, blob_root=None, quick: bool = False) -> BuiltinDefinition:
    """The gate's definition for a FlashInfer-Bench Definition (from a JSON file ``source``, a
    TraceSet): the built-in of that name when there is one (kernelwright's checker, input
    synthesis and roofline; its axes, inputs and outputs must match), else a generic definition
    (``definitions.generic``).  Safetensors inputs of its workloads are read under ``blob_root``;
    ``quick``: a built-in's reduced-size variant (a generic definition has none).

    Raises UnknownDefinition: the name is a built-in's but the spec differs (one line)."""
    from kernelwright.definitions import fixed, generic

    builtin = _registry().get(base_name(definition.name))
    if builtin is not None and is_quick(definition.name):
        builtin = builtin.quick_variant()     # e.g. a definition JSON exported from a --quick run
    if builtin is not None:
        differs = same_spec(definition, builtin.definition)
        if differs:
            where = f"{source}: " if source else ""
            raise UnknownDefinition(f"{where}definition {definition.name!r} has a built-in's name but its {differs}: "
                                    "rename it to evaluate it as a definition of its own")
        builtin = builtin.quick_if(quick)
        return fixed.with_fixed_inputs(builtin, blob_root) if blob_root is not None else builtin
    if source is None:
        raise UnknownDefinition(f"definition {definition.name!r} is not built in and has no file to locate it by")
    return generic.from_definition(definition, generic.locator_for(source), workloads, source=source,
                                   blob_root=blob_root)


def data_files(builtin: BuiltinDefinition, workloads) -> List[str]:
    """The files outside kernelwright that a run of ``builtin`` on ``workloads`` reads: the
    definition JSON of a ``file:`` definition and every safetensors file the workloads name
    (the gate protects them like its own sources: FILE_TAMPERED)."""
    from kernelwright.definitions import fixed, generic

    inner, _ = fixed.split_locator(builtin.locator)
    files = [str(generic.parse_locator(inner)[0])] if inner.startswith(generic.FILE_PREFIX) else []
    root = Path(builtin.blob_root) if builtin.blob_root else None
    return files + fixed.referenced_files(workloads, root)


__all__ = ["BuiltinDefinition", "QUICK_SUFFIX", "RooflineWork", "Tolerance", "UnknownDefinition", "adopt", "all_builtins",
           "base_name", "data_files", "get", "get_or_none", "is_quick", "quick_name", "resolve", "same_spec"]
