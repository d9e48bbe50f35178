"""The built-in definitions (the three contest workloads), their references, workload sets,
tolerances and roofline models.

``get(name)`` accepts the full definition name, its short alias (``moe``, ``indexer``,
``attention``) and the reduced-size ``<name>__quick`` variants.
"""

from __future__ import annotations

from typing import Dict, List

from kernelwright.definitions.base import BuiltinDefinition, RooflineWork, Tolerance


class UnknownDefinition(KeyError):
    """No built-in definition has that name."""

    def __str__(self) -> str:  # one line, no quotes around the message
        return self.args[0]


def _registry() -> Dict[str, BuiltinDefinition]:
    from kernelwright.definitions import dsa_attention, dsa_indexer, moe_fp8

    return {b.name: b for b in (moe_fp8.BUILTIN, dsa_indexer.BUILTIN, dsa_attention.BUILTIN)}


def all_builtins() -> List[BuiltinDefinition]:
    return list(_registry().values())


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


__all__ = ["BuiltinDefinition", "RooflineWork", "Tolerance", "UnknownDefinition", "all_builtins", "get"]
