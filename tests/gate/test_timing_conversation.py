"""The parent's side of the timing exchange (evaluate._TimingConversation): specs one at a time,
in order; parent-drawn samples copied at ``done``; the traced calls known by the parent's own
records; anything out of order recorded."""
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


def _run_held(talk, n, held_until, base=100):
    """n timed iterations reporting device samples: held before ``held_until``, idle after."""
    for i in range(n):
        talk({"step": "spec", "phase": "time", "i": i})
        kind = {"kind": "held", "outcome": "released", "ms": 0.01} if i < held_until else {"kind": "eager", "ms": 0.02}
        talk({"step": "done", "phase": "time", "i": i, "sample": kind})


def test_the_traced_calls_are_the_held_timed_iterations_by_the_parents_own_records():
    # CUPTI traces every held timed call past the warm-up: traced call j is the j-th of them, as
    # the parent recorded the iterations' kinds at their "done" (not as the worker lists them)
    talk = _TimingConversation(_ctx(), 0, _sets(), [200 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, base=200)
    samples, _ = talk.headline_samples({"kernel_sum_ms": [0.01] * 3, "kernel_span_ms": [0.01] * 3}, 2)
    assert samples["cupti_timed_iters"] == [2, 3, 4] and not talk.violations
    assert samples["latency_iters"] == [2, 3, 4] and samples["eager_iters"] == [5, 6, 7]


def test_cupti_records_for_another_number_of_calls_are_a_violation():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5)
    samples, _ = talk.headline_samples({"kernel_sum_ms": [0.01] * 2, "kernel_span_ms": [0.01] * 2}, 2)
    assert samples["cupti_timed_iters"] == [] and talk.violations
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5)
    samples, _ = talk.headline_samples({}, 2)                      # nothing traced (no CUPTI): no pairs
    assert samples["cupti_timed_iters"] == [] and not talk.violations


def test_a_cupti_phase_spec_is_a_violation():
    # no call is traced apart from the timed loop, so no spec is served for one
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run(talk, 8)
    assert _cupti(talk, 0) is None and talk.violations


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
