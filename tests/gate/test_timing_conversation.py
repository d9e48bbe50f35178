"""The parent's side of the timing exchange (evaluate._TimingConversation): specs one at a time,
in order; parent-drawn samples copied at ``done``; anything out of order recorded."""
from types import SimpleNamespace

import torch

from kernelwright.gate.evaluate import _TimingConversation


def _ctx(warmup=2, random_samples=1, twin=3):
    cfg = SimpleNamespace(warmup=warmup)
    return SimpleNamespace(cfg=cfg, sample_plan=[{twin: 0}], random_samples=[random_samples],
                           graph_plan={1: 0}, graph_seeds=[11, 12, 13], device=torch.device("cpu"))


def _sets():
    return [{"inputs": [], "outputs": [torch.full((4,), float(s))]} for s in range(2)]


def _run(talk, n):
    for i in range(n):
        assert talk({"step": "spec", "phase": "time", "i": i})["spec"] == 100 + i
        assert talk({"step": "done", "phase": "time", "i": i}) == {"step": "done"}


def test_in_order_exchange_copies_the_twin_and_the_drawn_samples():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=True)
    _run(talk, 8)
    assert not talk.violations and talk.done == 7
    assert 3 in talk.snapshots                              # the twin, always
    assert len(talk.snapshots) == 2                         # + exactly random_samples drawn ones
    assert all(i >= 2 for i in talk.snapshots)              # never a warm-up iteration
    for i, copies in talk.snapshots.items():                # copies of the set the iteration used
        assert torch.equal(copies[0], torch.full((4,), float(i % 2)))
    assert talk({"step": "spec", "phase": "graph", "i": 1})["spec"] == 12
    talk({"step": "done", "phase": "graph", "i": 1})
    assert list(talk.graph_snapshots) == [1]


def test_a_forged_or_skipped_step_is_recorded():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    talk({"step": "spec", "phase": "time", "i": 0})
    talk({"step": "done", "phase": "time", "i": 0})
    talk({"step": "done", "phase": "time", "i": 0})          # a second "done" for the same call
    assert talk.violations
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    assert "spec" not in talk({"step": "spec", "phase": "time", "i": 5})   # asking ahead
    assert talk.violations
