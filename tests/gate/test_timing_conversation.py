"""The parent's side of the timing exchange (evaluate._TimingConversation): specs one at a time,
in order; parent-drawn samples copied at ``done``; the CUPTI window's held iterations drawn after
the loop; anything out of order recorded."""
from types import SimpleNamespace

import torch

from kernelwright.gate.evaluate import _TimingConversation


def _ctx(warmup=2, random_samples=1, twin=3):
    cfg = SimpleNamespace(warmup=warmup)
    return SimpleNamespace(cfg=cfg, sample_plan=[{twin: 0}], random_samples=[random_samples],
                           graph_plan={1: 0}, graph_seeds=[11, 12, 13], device=torch.device("cpu"))


def _sets():
    return [{"inputs": [], "outputs": [torch.full((4,), float(s))]} for s in range(2)]


def _run(talk, n, base=100):
    for i in range(n):
        assert talk({"step": "spec", "phase": "time", "i": i})["spec"] == base + i
        assert talk({"step": "done", "phase": "time", "i": i}) == {"step": "done"}


def _cupti(talk, i):
    return talk({"step": "spec", "phase": "cupti", "i": i}).get("spec")


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


def test_every_trial_traces_the_inputs_of_its_own_drawn_held_iterations():
    # trial 1's CUPTI window runs on trial 1's specs: traced call i <-> the held timed iteration
    # the parent drew for it after the loop (even, past the warm-up), distinct, recorded in order
    ctx = _ctx()
    ctx.sample_plan, ctx.random_samples = [{3: 0}, {3: 0}], [1, 1]
    trial_1 = [200 + i for i in range(8)]
    talk = _TimingConversation(ctx, 1, _sets(), trial_1, with_graph=False)
    _run(talk, 8, base=200)
    served = [_cupti(talk, i) for i in range(3)]
    assert not talk.violations
    assert sorted(talk.cupti_iters) == [2, 4, 6]                      # all three held iterations, once each
    assert served == [trial_1[it] for it in talk.cupti_iters]
    assert talk.last_spec_by_set[0] == served[-1]
    samples, _ = talk.headline_samples({}, 2)
    assert samples["cupti_timed_iters"] == talk.cupti_iters          # the parent's record pairs them
    assert _cupti(talk, 3) is None and talk.violations                # no fourth held iteration


def test_the_window_is_drawn_only_after_the_timed_loop():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    assert _cupti(talk, 0) is None and talk.violations and not talk.cupti_order   # before any iteration
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run(talk, 7)                                                     # the last timed iteration not done
    assert _cupti(talk, 0) is None and talk.violations and not talk.cupti_order
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run(talk, 8)
    assert _cupti(talk, 1) is None and talk.violations                # out of order
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run(talk, 8)
    assert _cupti(talk, 0) is not None and not talk.violations


def test_the_drawn_iterations_are_not_the_first_after_the_warmup():
    # a default trial (warm-up 10, 50 timed): 6 traced calls drawn among the 25 held iterations,
    # not iterations 10..15 that a solution counting its calls could be honest on
    ctx = _ctx(warmup=10, random_samples=0, twin=20)
    draws = []
    for _ in range(20):
        talk = _TimingConversation(ctx, 0, _sets(), list(range(60)), with_graph=False)
        _run(talk, 60, base=0)
        assert [_cupti(talk, i) for i in range(6)] == talk.cupti_iters and not talk.violations
        assert len(set(talk.cupti_iters)) == 6
        assert all(it >= 10 and it % 2 == 0 for it in talk.cupti_iters)
        draws.append(tuple(talk.cupti_iters))
    assert len(set(draws)) > 1                                        # drawn, not fixed
    assert any(it >= 20 for d in draws for it in d)
    assert not all(set(d) <= set(range(10, 18)) for d in draws)


def test_the_cupti_window_of_each_trial():
    from kernelwright.gate.evaluate import LATER_TRIAL_CUPTI_ITERATIONS, GateConfig

    cfg = GateConfig(device="cpu")
    assert [cfg.cupti_window(t) for t in range(3)] == [8, LATER_TRIAL_CUPTI_ITERATIONS, LATER_TRIAL_CUPTI_ITERATIONS]
    assert LATER_TRIAL_CUPTI_ITERATIONS >= 3
    quick = GateConfig.preset("cpu", quick=True)
    assert [quick.cupti_window(t) for t in range(3)] == [3, 3, 3]
    assert [GateConfig(device="cpu", cupti_iterations=0).cupti_window(t) for t in range(3)] == [0, 0, 0]
    # never more traced calls than held timed iterations: warm-up 2, timed 2..4 holds 2 and 4
    tiny = GateConfig(device="cpu", warmup=2, iterations=3)
    assert [tiny.cupti_window(t) for t in range(3)] == [2, 2, 2]
    assert GateConfig(device="cpu", warmup=3, iterations=1).cupti_window(0) == 0


def test_graph_and_profile_specs_are_served_only_after_the_timed_loop():
    # graph seeds are trial 0's held timed iterations (paired_graph_seeds) and profile specs timed
    # ones: served mid-loop they told a call the inputs of iterations still to come (red-team
    # case spec_ahead: the first warm-up call precomputed every timed output and PASSED)
    for phase in ("graph", "profile"):
        talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=True)
        _run(talk, 3)
        assert "spec" not in talk({"step": "spec", "phase": phase, "i": 2})
        assert talk.violations and "before the timed loop finished" in talk.violations[0]
        talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=True)
        _run(talk, 8)
        assert "spec" in talk({"step": "spec", "phase": phase, "i": 0}) and not talk.violations
