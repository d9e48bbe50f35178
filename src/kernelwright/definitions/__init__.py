"""The built-in definitions (the three contest workloads), their references, workload sets,
tolerances and roofline models.

``get(name)`` accepts the full definition name, its short alias (``moe``, ``indexer``,
``attention``) and the reduced-size ``<name>__quick`` variants.
"""

from __future__ import annotations

from typing import Dict, List

import dataclasses

from kernelwright.definitions.base import BuiltinDefinition, RooflineWork, Tolerance


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
    quick = name.endswith("__quick")
    base = name[: -len("__quick")] if quick else name
    found = reg.get(base) or next((b for b in reg.values() if b.short == base), None)
    if found is None:
        known = ", ".join(sorted(list(reg) + [b.short for b in reg.values()]))
        raise UnknownDefinition(f"unknown definition {name!r} (known: {known})")
    return found.quick_variant() if quick else found


def resolve(locator: str) -> BuiltinDefinition:
    """A built-in name/alias, or ``package.module:ATTRIBUTE`` naming a BuiltinDefinition object
    (how user definitions are plugged in).  Raises UnknownDefinition."""
    if ":" in locator:
        import importlib

        if locator.endswith("__quick"):
            return resolve(locator[: -len("__quick")]).quick_variant()
        module_name, _, attr = locator.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownDefinition(f"cannot load definition {locator!r}: {exc}") from exc
        if not isinstance(found, BuiltinDefinition):
            raise UnknownDefinition(f"{locator!r} is not a BuiltinDefinition")
        return found if found.ref else dataclasses.replace(found, ref=locator)
    return get(locator)


__all__ = ["BuiltinDefinition", "RooflineWork", "Tolerance", "UnknownDefinition", "all_builtins", "get", "resolve"]
