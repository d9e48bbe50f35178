"""The ``__quick`` suffix is added, tested and stripped by one set of helpers."""

from kernelwright import definitions
from kernelwright.definitions import base_name, is_quick, quick_name


def test_quick_name_round_trip():
    assert quick_name("moe") == "moe__quick"
    assert is_quick("moe__quick") and not is_quick("moe")
    assert base_name(quick_name("moe")) == "moe" and base_name("moe") == "moe"


def test_builtin_quick_helpers():
    full = definitions.get("demo")
    quick = full.quick_if(True)
    assert quick.name == quick_name(full.name) and quick.is_quick and not full.is_quick
    assert quick.quick_if(True) is quick and full.quick_if(False) is full
    assert quick.base_name == full.name == full.base_name
