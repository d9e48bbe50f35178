"""Package attributes imported on first use: a package's ``__getattr__`` (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name in ``where`` is imported from the submodule
    ``package.<where[name]>`` when first asked for.  Any other name raises AttributeError, so that
    ``from package import submodule`` imports the submodule as it would without it."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
