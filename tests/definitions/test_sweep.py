"""The MoE sweep workload set (issue 5's targets) and its selection through the CLI helpers."""
import pytest

from kernelwright import definitions
from kernelwright.cli.common import UsageError, pick_workloads


def test_moe_sweep_covers_every_power_of_two_at_both_offsets():
    moe = definitions.get("moe")
    sweep = moe.sweep_workloads()
    got = sorted((w.axes["seq_len"], w.inputs["local_expert_offset"].value) for w in sweep)
    assert got == sorted((1 << i, off) for i in range(15) for off in (0, 224))
    assert len({w.uuid for w in sweep}) == 30
    assert not {w.uuid for w in sweep} & {w.uuid for w in moe.public_workloads()}
    assert all(w.inputs["routed_scaling_factor"].value == 2.5 for w in sweep)


def test_pick_workloads_sweep_and_limits():
    moe = definitions.get("moe")
    assert [w.axes["seq_len"] for w in pick_workloads(moe, None, 3, sweep=True)] == [1, 2, 4]
    assert [w.uuid for w in pick_workloads(moe, ["sweep-moe-t16384"], None, sweep=True)] == \
        ["sweep-moe-t16384-o0", "sweep-moe-t16384-o224"]
    assert len(pick_workloads(moe, None, None)) == 19          # the contest set stays the default


def test_sweep_is_refused_where_there_is_none():
    with pytest.raises(UsageError, match="no sweep workload set"):
        pick_workloads(definitions.get("indexer"), None, None, sweep=True)
    with pytest.raises(UsageError, match="no sweep workload set"):
        pick_workloads(definitions.get("moe").quick_variant(), None, None, sweep=True)
