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


def test_every_trial_traces_the_inputs_of_its_own_timed_iterations():
    # trial 1's CUPTI window runs on trial 1's specs: traced call i <-> its timed iteration warmup + i
    ctx = _ctx()
    ctx.sample_plan, ctx.random_samples = [{3: 0}, {3: 0}], [1, 1]
    trial_1 = [200 + i for i in range(8)]
    talk = _TimingConversation(ctx, 1, _sets(), trial_1, with_graph=False)
    assert [talk({"step": "spec", "phase": "cupti", "i": i})["spec"] for i in range(3)] == [202, 203, 204]
    assert talk.last_spec_by_set[0] == 204 and not talk.violations


def test_the_cupti_window_of_each_trial():
    from kernelwright.gate.evaluate import LATER_TRIAL_CUPTI_ITERATIONS, GateConfig

    cfg = GateConfig(device="cpu")
    assert [cfg.cupti_window(t) for t in range(3)] == [8, LATER_TRIAL_CUPTI_ITERATIONS, LATER_TRIAL_CUPTI_ITERATIONS]
    assert LATER_TRIAL_CUPTI_ITERATIONS >= 3
    quick = GateConfig.preset("cpu", quick=True)
    assert [quick.cupti_window(t) for t in range(3)] == [3, 3, 3]
    assert [GateConfig(device="cpu", cupti_iterations=0).cupti_window(t) for t in range(3)] == [0, 0, 0]
