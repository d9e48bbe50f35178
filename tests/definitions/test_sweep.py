"""The serving-envelope (sweep) workload sets of MoE, the indexer and attention, their regimes, and
their selection through the CLI helpers."""
import pytest

from kernelwright import definitions
from kernelwright.selection import UsageError, pick_workloads


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


def test_indexer_envelope_is_batch_by_context_on_distinct_pages():
    idx = definitions.get("indexer")
    sweep = idx.sweep_workloads()
    shapes = sorted((w.axes["batch_size"], w.axes["max_num_pages"] * 64) for w in sweep)
    assert shapes == sorted((b, c) for b in (1, 4, 16, 32, 64) for c in (4096, 8192, 16384, 32768, 65536, 131072))
    assert all(w.axes["num_pages"] == w.axes["batch_size"] * w.axes["max_num_pages"] for w in sweep)
    assert [idx.regime_of(w) for w in sweep[:5]] == ["ctx 4K"] * 5
    assert idx.regime_of(idx.public_workloads()[0]) in idx.regimes_order   # contest workloads keep theirs


def test_attention_envelope_rows_come_from_one_request():
    import torch

    from kernelwright.definitions.base import context_of
    from kernelwright.inputs import make_generator

    att = definitions.get("attention")
    sweep = att.sweep_workloads()
    assert {(w.axes["num_tokens"], context_of(w.uuid)) for w in sweep} >= {(1, 4096), (128, 131072), (64, 1024)}
    w = next(w for w in sweep if w.uuid == "sweep-att-t8-ctx4096")
    x = att.make_inputs(att.definition, w, make_generator(3, torch.device("cpu")), torch.device("cpu"))
    idx = x["sparse_indices"]
    assert idx.shape == (8, 2048) and bool((idx >= 0).all())
    assert all(len(set(row.tolist())) == 2048 for row in idx)                 # distinct ids per row
    shared = len(set(idx[0].tolist()) & set(idx[7].tolist()))
    assert shared > 512                     # rows of one 4K-token request overlap (random: ~1000)
    pages = {int(t) // 64 for t in idx.reshape(-1).tolist()}
    assert len(pages) <= 4096 // 64         # all inside the request's 64 pages
    short = next(w for w in sweep if w.uuid == "sweep-att-t8-ctx1024")
    y = att.make_inputs(att.definition, short, make_generator(3, torch.device("cpu")), torch.device("cpu"))
    valid = (y["sparse_indices"] >= 0).sum(dim=1).tolist()
    assert valid == [1024 - 8 + t + 1 for t in range(8)]                       # causal, then -1 padding
    assert att.regime_of(w) == "T=8"


def test_sweep_is_refused_where_there_is_none():
    with pytest.raises(UsageError, match="no sweep workload set"):
        pick_workloads(definitions.get("demo"), None, None, sweep=True)
    with pytest.raises(UsageError, match="no sweep workload set"):
        pick_workloads(definitions.get("moe").quick_variant(), None, None, sweep=True)
