"""The device-time clock: which iterations hold the stream, how a trial's samples become the
headline, and when the gate refuses device time.  The CPU tests cover the logic with samples as
the worker reports them; the ``gpu`` tests run the blocking kernel itself."""
import pytest
import torch

from kernelwright.gate import guards
from kernelwright.gate import timing as T
from kernelwright.gate.headline import ClockTrials, graph_agreement, graph_disagreement, phase_pairs


def test_hold_policy_holds_the_first_half_and_gives_up_after_timeouts_past_the_warmup():
    policy = T.HoldPolicy(available=True, warmup=2, count=12, max_timeouts=2)
    assert [policy.holds(i) for i in range(12)] == [True] * 7 + [False] * 5   # warm-up + 5 of 10 held
    assert T.HoldPolicy(available=True, warmup=2, count=7).split == 5      # an odd count: the extra one held
    assert policy.note(0, T.HOLD_TIMED_OUT) is False      # a warm-up timeout (a first-call graph capture)
    assert not policy.off and policy.warmup_timeouts == 1
    assert policy.note(2, T.HOLD_RELEASED) is True
    assert policy.note(3, T.HOLD_TIMED_OUT) is False
    assert not policy.off
    policy.note(4, T.HOLD_UNKNOWN)                         # an unreadable status counts as a timeout
    assert policy.off and policy.timeouts == 2
    assert not any(policy.holds(i) for i in range(5, 12))


def test_hold_policy_without_a_hold_never_holds():
    policy = T.HoldPolicy(available=False, warmup=0, count=6)
    assert not any(policy.holds(i) for i in range(6))


def _device_trial(device_ms=0.020, eager_ms=0.060, d2h=(0, 0), traced=True, **extra):
    return {"clock": "device", "latency_ms": [device_ms] * 5, "latency_iters": [10, 12, 14, 16, 18],
            "eager_latency_ms": [eager_ms] * 5, "eager_iters": [11, 13, 15, 17, 19], "wall_ms": [eager_ms + 0.02] * 5,
            "empty_wall_ms": [0.015] * 5, "held_wall_ms": [device_ms + 0.01] * 5, "empty_held_wall_ms": [0.01] * 5,
            "held_span_ms": [0.2] * 5, "host_ms": [0.09] * 5, "hold_kind": "blocking kernel",
            "cupti_d2h_bytes": list(d2h), "cupti_copies_traced": traced, **extra}


def test_device_headline_with_eager_beside_it():
    clocks = ClockTrials()
    for _ in range(3):
        assert clocks.add(_device_trial()) is None
    h = clocks.decide()
    assert h.clock == "device" and h.latency_ms == pytest.approx(0.020) and h.eager_ms == pytest.approx(0.060)
    assert h.notes["host_path_us"] == pytest.approx(90.0)
    assert clocks.unmeasured_work(h) is None


def test_a_device_to_host_copy_turns_the_headline_eager():
    clocks = ClockTrials()
    clocks.add(_device_trial(d2h=(0, 4096)))
    h = clocks.decide()
    assert h.clock == "eager" and h.latency_ms == pytest.approx(0.060)
    assert "4096 bytes" in h.notes["device_time_refused"]


def test_a_copy_that_started_before_the_release_turns_the_headline_eager():
    # a copy engine is not held: a device-to-device copy or a memset from a private stream that
    # CUPTI saw start before the release hides from the events (no bytes to the host needed)
    clocks = ClockTrials()
    clocks.add(_device_trial(cupti_prerelease_copies=[0, 1, 0]))
    h = clocks.decide()
    assert h.clock == "eager" and h.latency_ms == pytest.approx(0.060)
    assert "copy or memset" in h.notes["device_time_refused"]
    assert clocks.unmeasured_work(h) is None
    clocks = ClockTrials()
    clocks.add(_device_trial(cupti_prerelease_copies=[0, 0]))
    assert clocks.decide().clock == "device"


def test_untraced_copies_refuse_device_time_for_solutions_but_not_for_trusted_baselines():
    clocks = ClockTrials()
    clocks.add(_device_trial(traced=False, d2h=()))
    assert clocks.decide().clock == "eager"
    assert "CUPTI did not check" in clocks.decide().notes["device_time_refused"]
    assert clocks.decide(trusted=True).clock == "device"


def test_a_trial_that_could_not_hold_makes_every_trial_eager():
    clocks = ClockTrials()
    clocks.add(_device_trial())
    clocks.add({**_device_trial(), "clock": "eager", "latency_ms": [0.060] * 5, "hold_timeouts": 2})
    h = clocks.decide()
    assert h.clock == "eager" and h.per_trial_ms == [pytest.approx(0.060)] * 2
    assert "2 held iteration(s) timed out" in h.notes["hold_timeouts"]


def test_impossible_samples_are_reported():
    assert "impossible" in ClockTrials().add({**_device_trial(), "latency_ms": [0.01, -1.0]})
    assert "impossible" in ClockTrials().add({**_device_trial(), "latency_ms": []})
    assert "wall-clock span" in ClockTrials().add({**_device_trial(eager_ms=5.0), "wall_ms": [1.0] * 5})
    assert "held event" in ClockTrials().add({**_device_trial(device_ms=0.5), "held_span_ms": [0.1] * 5})


def test_work_after_the_release_is_unmeasured_work():
    clocks = ClockTrials()
    clocks.add({**_device_trial(), "held_wall_ms": [2.0] * 5})      # 2 ms after the release for a 20 µs call
    msg = clocks.unmeasured_work(clocks.decide())
    assert msg and "after the release" in msg
    clocks = ClockTrials()
    clocks.add({**_device_trial(), "wall_ms": [2.0] * 5, "eager_latency_ms": [1.99] * 5})
    assert clocks.unmeasured_work(clocks.decide()) is None          # the eager events saw the work


def test_phase_pairs_pair_each_traced_call_with_its_drawn_iteration():
    s = {**_device_trial(), "latency_ms": [0.1, 0.2, 0.3, 0.4, 0.5],
         "kernel_sum_ms": [1.0, 2.0, 3.0, 4.0], "kernel_span_ms": [1.5, 2.5, 3.5, 4.5],
         "cupti_timed_iters": [18, 12, 11, 16]}                # 11: not on the headline clock, unpaired
    assert phase_pairs(s) == ([0.5, 0.2, 0.4], [1.0, 2.0, 4.0], [1.5, 2.5, 4.5])
    assert phase_pairs({**s, "latency_iters": []}) == ([], [], [])
    assert phase_pairs({**s, "cupti_timed_iters": []}) == ([], [], [])   # no draw, no pairs


def test_graph_agreement_flags_device_time_far_below_the_replay():
    clocks = ClockTrials()
    clocks.add(_device_trial(device_ms=0.020))
    h = clocks.decide()
    ratio, msg = graph_agreement(h, 0.021)
    assert ratio == pytest.approx(0.020 / 0.021) and msg is None
    ratio, msg = graph_agreement(h, 0.020 / (guards.DEVICE_GRAPH_MIN_RATIO * 0.9))
    assert msg and "CUDA-graph replay" in msg
    assert graph_agreement(h, None) == (None, None)


def test_graph_agreement_compares_the_replay_with_trial_0_where_it_ran():
    clocks = ClockTrials()
    clocks.add(_device_trial(device_ms=0.020))      # trial 0: the replays ran on its held inputs
    clocks.add(_device_trial(device_ms=0.060))      # other draws, a routing that hits more experts
    h = clocks.decide()
    ratio, msg = graph_agreement(h, 0.021)
    assert ratio == pytest.approx(0.020 / 0.021) and msg is None


def test_graph_disagreement_names_the_outlier_from_the_traced_span():
    band = guards.DEVICE_GRAPH_BAND
    assert graph_disagreement(0.100, 0.100 * (1 + band / 2), 0.09, 0.1) is None      # inside the band
    assert graph_disagreement(0.100, None, 0.09, 0.1) is None                        # no replay
    # MoE T = 4 on the H200 (2026-12-02-records-5/moe-sweep-a): device 66.9, graph 75.7, span 69.1 us
    msg = graph_disagreement(0.0669, 0.0757, 0.0692, 0.0691)
    assert "0.88x the graph replay 75.7 us" in msg and "the graph replay is the outlier" in msg
    msg = graph_disagreement(0.120, 0.100, 0.095, 0.101)
    assert "the device time is the outlier" in msg
    msg = graph_disagreement(0.150, 0.100, 0.080, 0.125)
    assert "of neither" in msg and "45.0 us between kernels" in msg
    assert "no traced call" in graph_disagreement(0.150, 0.100, None, None)


def test_the_graph_replays_run_on_trial_0s_held_inputs_then_fresh_ones():
    from kernelwright.gate.evaluate import paired_graph_seeds
    specs = [100, 101, 102, [102, 9, "x", 0, 4], 104, 105, 106, 107]
    # warm-up 2: held timed iterations 2, 3, 4 (the first half); iteration 3 is a twin (not a seed)
    assert paired_graph_seeds(specs, 2, 2, [7, 8]) == [102, 104]
    assert paired_graph_seeds(specs, 2, 5, [7, 8]) == [102, 104, 7, 8]
    assert paired_graph_seeds([], 2, 2, [7, 8]) == [7, 8]


def test_the_trace_names_its_clock():
    assert T.device_clock_label("device", "blocking kernel").startswith("device time: stream held by a blocking kernel")
    assert "host launch included" in T.device_clock_label("eager")
    assert T.device_clock_label("cpu").startswith("perf_counter")


def test_no_hold_off_cuda():
    assert T.StreamHold.create(torch.device("cpu")) is None
    assert T.StreamHold.why_not(torch.device("cpu")) == "no CUDA device"
    assert T.device_time_ms(lambda: None, torch.device("cpu")) is None


# -- on the GPU --------------------------------------------------------------------------------------

def _hold():
    hold = T.StreamHold.create(torch.device("cuda", torch.cuda.current_device()))
    if hold is None:
        pytest.skip(f"no stream hold: {T.StreamHold.why_not(torch.device('cuda', torch.cuda.current_device()))}")
    return hold


@pytest.mark.gpu
def test_the_hold_keeps_every_stream_off_the_device_until_released():
    """A kernel queued on another stream while the hold lasts starts only after the release: the
    hold fills every SM, so nothing can run beside it (the device clock's premise)."""
    import time

    hold = _hold()
    held, other = torch.cuda.current_stream(), torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    with torch.cuda.stream(other):
        x.add_(1)      # loaded before the hold: a lazily loaded kernel's first launch waits for the device
    torch.cuda.synchronize()
    released, other_done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    epoch = hold.begin(held)
    released.record(held)
    with torch.cuda.stream(other):
        x.add_(1)
        other_done.record(other)
    time.sleep(0.02)
    hold.release(epoch)
    torch.cuda.synchronize()
    assert hold.outcome(epoch) == T.HOLD_RELEASED
    assert released.elapsed_time(other_done) > -0.05, "a kernel on another stream ran while the stream was held"


@pytest.mark.gpu
def test_work_on_a_private_stream_is_inside_the_device_time():
    """A many-CTA kernel on a stream that does not wait for the held one (red-team case
    held_side_stream): the start event to the join must cover the whole kernel.  An SM kernel,
    not ``copy_``: a copy may run on a copy engine, which the hold does not take (the gate's
    CUPTI window refuses device time for a copy that starts before the release)."""
    hold = _hold()
    held, side = torch.cuda.current_stream(), torch.cuda.Stream()
    x = torch.empty(1 << 28, device="cuda")          # 1 GiB: ~0.5 ms of an elementwise kernel over many CTAs
    y = torch.empty_like(x)
    with torch.cuda.stream(side):
        torch.add(x, 1.0, out=y)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(side)
    with torch.cuda.stream(side):
        torch.add(x, 1.0, out=y)
    b.record(side)
    torch.cuda.synchronize()
    alone = a.elapsed_time(b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    epoch = hold.begin(held)
    start.record(held)
    with torch.cuda.stream(side):
        torch.add(x, 1.0, out=y)
    held.wait_stream(side)
    end.record(held)
    hold.release(epoch)
    torch.cuda.synchronize()
    assert hold.outcome(epoch) == T.HOLD_RELEASED
    assert start.elapsed_time(end) > 0.9 * alone, (start.elapsed_time(end), alone)


@pytest.mark.gpu
def test_a_hold_times_out_when_the_host_waits_for_the_device():
    dev = torch.device("cuda", torch.cuda.current_device())
    _hold()
    hold = T.StreamHold(dev, limit_s=0.005)
    stream = torch.cuda.current_stream()
    epoch = hold.begin(stream)
    torch.cuda.synchronize()           # what a call that reads a device value does: no deadlock
    assert hold.outcome(epoch) == T.HOLD_TIMED_OUT


@pytest.mark.gpu
def test_one_trivial_kernel_by_device_time_is_below_its_eager_latency():
    dev = torch.device("cuda", torch.cuda.current_device())
    _hold()
    x = torch.zeros(1, device=dev)
    device_ms = T.device_time_ms(lambda: x.add_(1), dev, iterations=20)
    assert device_ms is not None and 0 < device_ms < 0.1
    print(f"trivial kernel: {device_ms * 1e3:.2f} us device time")


@pytest.mark.gpu
def test_the_gate_times_a_shipped_solution_by_device_time():
    from kernelwright import definitions
    from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate
    from kernelwright.gate.session import WorkerSession
    from kernelwright.solutions import shipped_solutions

    _hold()
    builtin = definitions.get("demo")
    solution = shipped_solutions(builtin.name)[0]
    cfg = GateConfig.preset("cuda", quick=True)
    session = WorkerSession(solution, "cuda")
    try:
        trace = evaluate(SolutionRun(session), WorkloadContext(builtin, builtin.public_workloads()[0], cfg))
    finally:
        session.close()
    perf = trace.evaluation.performance
    assert trace.passed, trace.evaluation.log[-2000:]
    assert perf.clock == "device" and perf.timing_method.startswith("device time")
    assert perf.eager_latency_ms is not None and perf.graph_latency_ms is not None
    print("device", perf.latency_ms * 1e3, "eager", perf.eager_latency_ms * 1e3, "graph", perf.graph_latency_ms * 1e3,
          trace.evaluation.gate.notes.get("clock"))


def test_a_kernel_that_started_before_the_release_is_unmeasured_work():
    from kernelwright.gate.headline import cupti_span_reference

    clocks = ClockTrials()
    clocks.add({**_device_trial(), "cupti_prerelease": [0, 3], "cupti_held": [True, True]})
    h = clocks.decide()
    assert "started while the stream was held" in clocks.unmeasured_work(h)
    assert cupti_span_reference(clocks, h) == pytest.approx(h.latency_ms)     # held traced calls: device time
    clocks = ClockTrials()
    clocks.add({**_device_trial(), "cupti_held": [True, False]})
    h = clocks.decide()
    assert clocks.unmeasured_work(h) is None
    assert cupti_span_reference(clocks, h) == pytest.approx(h.eager_ms)       # some ran idle: eager


@pytest.mark.gpu
def test_a_triton_kernel_replayed_from_a_torch_graph_counts_as_launched():
    import triton
    import triton.language as tl

    from kernelwright.gate.worker import LaunchCounter

    @triton.jit
    def _kw_graph_probe(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    counter = LaunchCounter()
    assert counter.install(interpreter=False)
    x = torch.zeros(1, device="cuda")
    _kw_graph_probe[(1,)](x)                     # compiled and counted eagerly
    torch.cuda.synchronize()
    before = counter.by_name.get("_kw_graph_probe", [0])[0]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _kw_graph_probe[(1,)](x)
    assert counter.by_name.get("_kw_graph_probe", [0])[0] == before      # captured: not run
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    assert counter.by_name["_kw_graph_probe"][0] == before + 2
    assert float(x.item()) == 3.0


def test_a_kernel_named_like_the_hold_is_unmeasured_work():
    clocks = ClockTrials()
    clocks.add(_device_trial(cupti_hold_records=[0, 1, 0]))
    msg = clocks.unmeasured_work(clocks.decide())
    assert msg and "named like the gate's hold kernel" in msg
    clocks = ClockTrials()
    clocks.add(_device_trial(cupti_hold_records=[0, 0]))
    assert clocks.unmeasured_work(clocks.decide()) is None


# -- every trial's held calls paired with their own CUPTI records (PHASE_MISMATCH, docs/gate.md section 1) --

def _traced_trial(held_ms, traced_ms, warmup=10, drawn=None):
    """One trial's samples as the worker and the parent's records give them: held timed iterations
    warmup, warmup + 2, ... with latencies ``held_ms``, and traced call j, timed iteration
    ``drawn[j]`` (by default the held ones in order), with kernel time ``traced_ms[j]`` (sum = span)."""
    iters = [warmup + 2 * k for k in range(len(held_ms))]
    drawn = iters[:len(traced_ms)] if drawn is None else list(drawn)
    return {**_device_trial(), "latency_ms": list(held_ms), "latency_iters": iters,
            "held_wall_ms": [max(held_ms) + 0.01] * len(held_ms), "held_span_ms": [max(held_ms) + 0.2] * len(held_ms),
            "kernel_sum_ms": list(traced_ms), "kernel_span_ms": list(traced_ms), "cupti_timed_iters": drawn}


def _bimodal(slow_ms, fast_ms, modes):
    """Per-iteration cost of a bimodal workload (MoE at T = 1: a token hits local experts or not)."""
    return [slow_ms if m else fast_ms for m in modes]


def test_an_honest_bimodal_workload_passes_each_trials_own_pairing():
    # trial 0 mostly slow, trial 1 mostly fast (medians 3x apart), trial 2 mixed; within a trial
    # every traced call ran the same inputs as the held iteration drawn for it, so it sits in the
    # same mode, slowed a little
    slow, fast = 0.060, 0.020
    modes = {0: [1, 1, 0, 1, 1, 0, 1, 1, 1], 1: [0, 0, 1, 0, 0, 1, 0, 0, 0], 2: [1, 0, 1, 0, 0, 1, 1, 0, 0]}
    draws = {0: [26, 10, 14, 18, 12, 22, 20, 16], 1: [24, 12, 20, 14, 10, 16], 2: [22, 18, 26, 10, 12, 24]}
    clocks = ClockTrials()
    for t in range(3):
        held = _bimodal(slow, fast, modes[t])
        per_traced = [held[(it - 10) // 2] for it in draws[t]]
        assert clocks.add(_traced_trial(held, [1.04 * x for x in per_traced], drawn=draws[t])) is None
    h = clocks.decide()
    assert h.clock == "device"
    assert h.per_trial_ms[0] == pytest.approx(3 * h.per_trial_ms[1])
    assert clocks.phase_mismatch() == (None, "")
    assert [len(p.timed) for p in clocks.phase] == [8, 6, 6]         # every traced call a held pair
    assert all(r == pytest.approx(1 / 1.04) for r in clocks.phase_ratios())
    # the backstop across trials (different draws) passes too: 3x is inside its 4x allowance
    assert guards.trial_phase_verdict(h.per_trial_ms, *clocks.window(0))[0] is None


def test_a_later_trial_timing_half_its_traced_work_is_phase_mismatch():
    # red-team case split_later_trials (H200: per trial [0.2055, 0.1127] ms): honest in trial 0,
    # then 90 of its 200 us on an unjoined private stream, except in the trial's own CUPTI window
    clocks = ClockTrials()
    clocks.add(_traced_trial([0.2055] * 8, [0.2010] * 8))
    clocks.add(_traced_trial([0.1127] * 8, [0.2049] * 6))        # 0.55x its own traced kernel time
    h = clocks.decide()
    reason, message = clocks.phase_mismatch()
    assert reason == guards.PHASE_MISMATCH
    assert message.startswith("trial 1: on the same inputs the timed calls took 0.55x")
    assert clocks.phase_ratios() == [pytest.approx(0.2055 / 0.2010), pytest.approx(0.1127 / 0.2049)]
    # what judged the later trials before: the loose cross-trial bound lets it through
    assert guards.trial_phase_verdict(h.per_trial_ms, *clocks.window(0))[0] is None


def test_a_trial_without_a_window_is_not_paired_and_the_kernel_time_averages_the_windows():
    clocks = ClockTrials()
    clocks.add(_traced_trial([0.2] * 8, [0.1] * 8))
    clocks.add({**_device_trial(), "cupti_error": "RuntimeError: lost"})   # this trial's window failed
    clocks.add(_traced_trial([0.2] * 8, [0.3] * 6))
    assert clocks.window(1) is None and clocks.window(0) == (pytest.approx(0.1), pytest.approx(0.1))
    assert clocks.phase_ratios() == [pytest.approx(2.0), None, pytest.approx(0.2 / 0.3)]
    assert clocks.kernel_time_ms() == (pytest.approx(0.2), pytest.approx(0.2))
    assert clocks.phase_mismatch()[0] == guards.PHASE_MISMATCH          # trial 2: 0.67x
    # without the parent's draw the traced calls cannot be placed among the timed ones: no pairs
    unpaired = ClockTrials()
    unpaired.add({**_traced_trial([0.1] * 8, [0.3] * 8), "cupti_timed_iters": []})
    assert unpaired.phase_ratios() == [None] and unpaired.phase_mismatch() == (None, "")


def test_the_phase_check_rejects_a_later_trial_against_its_own_window():
    # evaluate._check_phases, fed the clocks of the two tests above
    from types import SimpleNamespace

    from kernelwright.gate.evaluate import _check_phases

    def judged(trials):
        clocks = ClockTrials()
        for held, traced in trials:
            clocks.add(_traced_trial(held, traced))
        rejected = []
        ev = SimpleNamespace(cfg=SimpleNamespace(guards=True), clocks=clocks, headline=clocks.decide(),
                             ctx=SimpleNamespace(device=torch.device("cuda")),
                             reject=lambda reason, message: rejected.append((reason, message)) or reason)
        return _check_phases(ev), rejected

    stop, rejected = judged([([0.2055] * 8, [0.2010] * 8), ([0.1127] * 8, [0.2049] * 6)])
    assert stop == guards.PHASE_MISMATCH and rejected[0][1].startswith("trial 1:")
    stop, _ = judged([([0.060] * 8, [0.058] * 8), ([0.020] * 8, [0.019] * 6), ([0.060] * 8, [0.059] * 6)])
    assert stop is None
    # a later trial far below trial 0 without a window of its own: the backstop still decides
    clocks_trials = [([0.2] * 8, [0.2] * 8), ([0.001] * 8, [])]
    stop, rejected = judged(clocks_trials)
    assert stop == guards.PHASE_MISMATCH and rejected[0][1].startswith("trial 1 timed")


