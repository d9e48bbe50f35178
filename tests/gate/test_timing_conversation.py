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


def _run_held(talk, n, held_until, base=100, cupti=None):
    """n timed iterations reporting device samples: held before ``held_until``, idle after; CUPTI's
    lists (``cupti``: the fields given, the rest as an op that traced nothing) sent as the worker
    sends them, between the last held and the first idle iteration."""
    for i in range(n):
        if i == held_until and cupti is not None:
            _send_cupti(talk, cupti)
        talk({"step": "spec", "phase": "time", "i": i})
        kind = {"kind": "held", "outcome": "released", "ms": 0.01} if i < held_until else {"kind": "eager", "ms": 0.02}
        talk({"step": "done", "phase": "time", "i": i, "sample": kind})


def _send_cupti(talk, fields):
    from kernelwright.gate import timing

    lists = {**timing.untraced_lists(), "kernels": {}, "kernel_durations": {}, **fields}
    assert talk({"step": "sample", "phase": "cupti", "i": 0, **lists}) == {"step": "sample"}


def _traced(calls, **more):
    """CUPTI lists of ``calls`` honest traced calls (one hold and one launched kernel ``k`` each)."""
    return {"kernel_sum_ms": [0.01] * calls, "kernel_span_ms": [0.01] * calls, "cupti_held": [True] * calls,
            "kernels": {"k": [calls, 10.0 * calls]}, "launched": {"k": calls}, "cupti_copies_traced": True,
            "cupti_d2h_bytes": [0] * calls, **more}


def test_the_traced_calls_are_the_held_timed_iterations_by_the_parents_own_records():
    # CUPTI traces every held timed call past the warm-up: traced call j is the j-th of them, as
    # the parent recorded the iterations' kinds at their "done" (not as the worker lists them)
    talk = _TimingConversation(_ctx(), 0, _sets(), [200 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, base=200, cupti=_traced(3))
    samples, edited = talk.headline_samples(_traced(3), 2)
    assert samples["cupti_timed_iters"] == [2, 3, 4] and not talk.violations and not talk.tracer_problems
    assert samples["latency_iters"] == [2, 3, 4] and samples["eager_iters"] == [5, 6, 7]
    assert not edited


def test_cupti_records_for_another_number_of_calls_are_a_violation():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, cupti=_traced(2))
    samples, _ = talk.headline_samples(_traced(2), 2)
    assert samples["cupti_timed_iters"] == [] and talk.violations
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5)
    samples, _ = talk.headline_samples({}, 2)                      # nothing traced (no CUPTI): no pairs
    assert samples["cupti_timed_iters"] == [] and not talk.violations


def test_the_parent_keeps_the_cupti_lists_as_sent_and_notes_a_reply_that_differs():
    # case forge_traced_lists: the lists zeroed in the worker after they were sent
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, cupti=_traced(3, cupti_d2h_bytes=[2048, 2048, 2048]))
    samples, edited = talk.headline_samples(_traced(3, cupti_d2h_bytes=[0, 0, 0]), 2)
    assert samples["cupti_d2h_bytes"] == [2048] * 3 and edited == ["cupti_d2h_bytes"]
    # lists in a reply of an op that sent none (or claims copies were traced) are not taken either
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5)
    samples, edited = talk.headline_samples(_traced(3), 2)
    assert samples["kernel_sum_ms"] == [] and not samples["cupti_copies_traced"] and samples["launched"] is None
    assert {"kernel_sum_ms", "cupti_copies_traced", "launched", "cupti_held"} <= set(edited)
    assert samples["kernels"] == {"k": [3, 30.0]}              # the profiled call's names come with the reply


def test_cupti_lists_sent_twice_or_among_the_idle_calls_are_violations():
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, cupti=_traced(3))
    talk({"step": "sample", "phase": "cupti", "i": 0, **_traced(3)})
    assert talk.violations == ["CUPTI lists sent twice"]
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    _run_held(talk, 8, held_until=5, cupti=None)
    _send_cupti(talk, _traced(3))                                  # after every idle call
    talk.headline_samples(_traced(3), 2)
    assert talk.violations == ["CUPTI lists sent after timed iteration 7, not between the held and the idle iterations"]
    talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
    talk({"step": "spec", "phase": "time", "i": 0})
    talk({"step": "sample", "phase": "cupti", "i": 0, **_traced(0)})   # inside an iteration
    assert talk.violations == ["CUPTI lists sent inside timed iteration 0"]


def test_a_tampered_tracer_shows_in_the_lists_the_parent_keeps():
    # cases tracer_drop_records (the store's report), cupti_disable_unjoined (a launch CUPTI did not
    # record), and a tracer that lost the gate's own hold kernel of a released call
    for lists, words in ((_traced(3, cupti_tampered=["the CUPTI tracer's copy records were replaced by a _Drop"]),
                          "replaced by a _Drop"),
                         (_traced(3, launched={"k": 3, "_rmsnorm_after_spin": 3}), "no CUPTI record"),
                         (_traced(3, cupti_held=[True, False, True]), "no record of the gate's hold kernel")):
        talk = _TimingConversation(_ctx(), 0, _sets(), [100 + i for i in range(8)], with_graph=False)
        _run_held(talk, 8, held_until=5, cupti=lists)
        talk.headline_samples(lists, 2)
        assert not talk.violations and len(talk.tracer_problems) == 1 and words in talk.tracer_problems[0]


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


def test_the_cpu_headline_leaves_out_frame_watched_iterations_while_half_remain():
    """``timing.cpu_headline``: an iteration in which launch_frames checked a launch (2.6-4x the
    interpreter's time) does not count while at least half of the timed iterations remain; a
    flagged iteration that was not slow counts (the flag comes from the solution's process)."""
    from kernelwright.gate.timing import cpu_headline

    samples = [(0, 50.0, 1), (1, 10.0, 0), (2, 31.0, 1), (3, 11.0, 0), (4, 12.0, 2), (5, 10.5, 0)]
    assert cpu_headline(samples, warmup=1) == ([10.0, 11.0, 12.0, 10.5], [1, 3, 4, 5])
    mostly_watched = [(0, 10.0, 0), (1, 30.0, 1), (2, 31.0, 1), (3, 11.0, 0), (4, 32.0, 1)]
    assert cpu_headline(mostly_watched, warmup=0) == ([10.0, 30.0, 31.0, 11.0, 32.0], [0, 1, 2, 3, 4])
    every_one_watched = [(0, 30.0, 1), (1, 31.0, 1)]
    assert cpu_headline(every_one_watched, warmup=0) == ([30.0, 31.0], [0, 1])
