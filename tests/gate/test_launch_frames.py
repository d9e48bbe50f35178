"""The frame check of an interpreted launch (gate/launch_frames.py) and the launch-time checks
beside it (gate/interpreted.py): what existed before counts as trusted by (code, globals), what
was made after does not."""

import types

import pytest

from kernelwright.gate import interpreted
from kernelwright.gate.launch_frames import ForeignCode, ForeignFrames


def _trusted_before():
    return sum(range(3))


def test_functions_that_existed_before_run_and_later_ones_are_stopped():
    frames = ForeignFrames()
    assert frames.watch(_trusted_before) == 3 and frames.found is None

    def made_after():
        return 1

    frames2 = ForeignFrames()
    later = types.FunctionType(made_after.__code__, {"__builtins__": __builtins__})   # its own globals
    with pytest.raises(ForeignCode):
        frames2.watch(later)
    assert "made_after" in frames2.found


def test_trusted_code_with_other_globals_is_foreign_and_allow_trusts_a_body():
    frames = ForeignFrames()
    borrowed = types.FunctionType(_trusted_before.__code__, {"sum": sum, "range": range})
    with pytest.raises(ForeignCode):
        frames.watch(borrowed)
    frames = ForeignFrames()
    fresh = types.FunctionType(_trusted_before.__code__, {"sum": sum, "range": range})
    frames.allow(fresh)
    assert frames.watch(fresh) == 3 and frames.found is None


def test_a_frame_started_by_a_hook_inside_the_call_is_stopped_before_it_runs():
    """Code compiled after the frames were taken (a solution's import) runs nothing inside the
    watched call: a property the call reads is stopped at its first frame.  (Code nested in a
    function that existed before, as this test's own closures, is trusted by design.)"""
    frames = ForeignFrames()
    space = {"ran": []}
    exec(compile("class Sneaky:\n    @property\n    def value(self):\n        ran.append(1)\n        return 1\n",
                 "solution.py", "exec"), space)
    sneaky = space["Sneaky"]()
    with pytest.raises(ForeignCode):
        frames.watch(lambda: getattr(sneaky, "value"))
    assert space["ran"] == [] and "value (solution.py" in frames.found


class _ClassProperty:
    @property
    def __class__(self):
        return types.ModuleType


class _ModuleEq(types.ModuleType):
    def __eq__(self, other):
        return True

    __hash__ = types.ModuleType.__hash__


def test_globals_whose_lookup_or_comparison_runs_python_are_named():
    assert interpreted._lookup_hook(_ClassProperty()) is not None
    assert "__eq__" in interpreted._lookup_hook(_ModuleEq("m"))
    for plain in (1, "s", types, interpreted.JitBodyCheck, len, [1], pytest):
        assert interpreted._lookup_hook(plain) is None, plain


def test_a_table_item_replaced_removed_or_added_as_a_callable_is_named():
    table = {"a": len, "n": 1}
    before = {k: (id(v), v) for k, v in table.items() if callable(v)}
    assert interpreted._table_change(table, before) is None
    table["n"] = 2                       # data may change
    assert interpreted._table_change(table, before) is None
    table["b"] = print                   # a callable added
    assert interpreted._table_change(table, before) == "b"
    del table["b"]
    table["a"] = abs                     # replaced
    assert interpreted._table_change(table, before) == "a"
    del table["a"]                       # removed
    assert interpreted._table_change(table, before) == "a"
