"""The near-miss canaries in-process (no worker): on every quick workload and seed where the
damage changes the answer, the gate's default verdict (contest rule + strict rule) rejects it;
and for MoE the contest rule alone does not (the reason the strict rule exists: issue 25)."""

import pytest
import torch

from kernelwright import definitions
from kernelwright.gate.checkers import check_outputs
from kernelwright.gate.evaluate import normalize_outputs
from kernelwright.inputs import make_generator
from kernelwright.redteam.canaries import FILLS, NEAR_MISSES, canary_solution, damaged_outputs, kinds_for

SEEDS = (11, 12, 13)
CASES = [(b.short, k) for b in definitions.all_builtins() for k in kinds_for(b.short) if k in NEAR_MISSES]


def _draws(short, kind):
    """(builtin, inputs, expected, damaged) for every quick workload the canary applies to and every
    seed where the damaged outputs differ from the reference's."""
    b = definitions.get(short).quick_variant()
    for w in b.public_workloads():
        if not NEAR_MISSES[kind].applies(b, w):
            continue
        for seed in SEEDS:
            inputs = b.make_inputs(b.definition, w, make_generator(seed, "cpu"), torch.device("cpu"))
            expected = normalize_outputs(b.reference(**inputs), b.definition.output_names)
            damaged = damaged_outputs(short, kind, [inputs[n] for n in b.definition.input_names])
            outs = dict(zip(b.definition.output_names, damaged))
            if all(torch.equal(outs[n], expected[n]) for n in expected):
                continue    # e.g. MoE T=1 routed to no local expert: the reference is all zero
            yield b, inputs, expected, outs


@pytest.mark.parametrize("short,kind", CASES)
def test_near_miss_is_rejected_by_the_default_verdict(short, kind):
    draws = list(_draws(short, kind))
    assert len(draws) >= 3, f"{kind} changed the answer on only {len(draws)} draws of {short}"
    for b, inputs, expected, outs in draws:
        verdict = check_outputs(b.checker, outs, expected, b.tolerance, inputs)
        assert not verdict.passed, (short, kind, verdict.strict, verdict.matched_ratio)
        assert verdict.strict, "the strict errors are recorded"


@pytest.mark.parametrize("kind", ["scale_0.8", "scale_1.25"])
def test_the_contest_rule_alone_passes_scaled_moe_outputs(kind):
    """FlashInfer-Bench's MoE rule (atol 1, rtol 0.3, 90 %) accepts an output off by 20-25 %."""
    for b, inputs, expected, outs in _draws("moe", kind):
        contest = check_outputs(b.checker, outs, expected, b.tolerance.contest_only(), inputs)
        assert contest.passed and contest.rule == "contest"
        default = check_outputs(b.checker, outs, expected, b.tolerance, inputs)
        assert default.reason == "STRICT_TOLERANCE" and default.failed_rule == "strict"


def test_canary_kinds_per_definition():
    assert kinds_for("moe") == ["zeros", "constant", "scale_0.8", "scale_1.25", "zero_rows", "drop_expert"]
    assert kinds_for("attention") == ["zeros", "constant", "scale_0.8", "scale_1.25", "zero_rows", "half_indices"]
    assert kinds_for("indexer") == ["zeros", "constant", "zero_rows", "drop_head"]
    assert kinds_for("demo") == ["zeros", "constant", "scale_0.8", "scale_1.25", "zero_rows"]
    with pytest.raises(KeyError):
        damaged_outputs("indexer", "scale_0.8", [])


def test_canary_solutions_are_loadable_python():
    for b in definitions.all_builtins():
        for kind in kinds_for(b.short):
            sol = canary_solution(b.name, len(b.definition.outputs), kind, short=b.short)
            compile(sol.sources[0].content, "kernel.py", "exec")
            assert sol.definition == b.name and (kind in FILLS or "damaged_outputs" in sol.sources[0].content)


@pytest.mark.slow
def test_contest_rule_flag_passes_what_only_the_strict_rule_rejects(tmp_path):
    """Through the real gate: MoE x1.25 is rejected STRICT_TOLERANCE by default and PASSED under
    GateConfig.contest_rule (``--contest-rule``), which records the rule and the strict errors."""
    from dataclasses import replace

    from kernelwright.gate.evaluate import SolutionRun, WorkloadContext, evaluate
    from kernelwright.gate.session import WorkerSession
    from kernelwright.redteam.runner import gate_config

    full = definitions.get("moe")
    quick = full.quick_variant()
    workload = next(w for w in quick.public_workloads() if w.axes["seq_len"] == 37)
    sol = canary_solution(full.name, 1, "scale_1.25", short="moe")
    verdicts = {}
    for contest_rule in (False, True):
        cfg = replace(gate_config("cpu"), trials=1, iterations=2, contest_rule=contest_rule)
        session = WorkerSession(sol, "cpu", log_dir=tmp_path / str(contest_rule), protect=[])
        ctx = WorkloadContext(quick, workload, cfg)
        try:
            verdicts[contest_rule] = evaluate(SolutionRun(session, requires_kernel=False, label=sol.name), ctx)
        finally:
            session.close()
            ctx.release()
    default, contest = verdicts[False], verdicts[True]
    assert not default.passed and default.evaluation.gate.reasons[0] == "STRICT_TOLERANCE"
    assert default.evaluation.correctness.extra["failed_rule"] == "strict"
    assert contest.passed, contest.evaluation.log[-500:]
    extra = contest.evaluation.correctness.extra
    assert extra["rule"] == "contest" and extra["strict"]["output"]["rel_l2"] == pytest.approx(0.25, abs=0.01)


def test_zeroing_the_tokens_with_the_smallest_activation_scales_is_rejected():
    """Issue 22, class 6: MoE outputs with the 10 % of tokens whose activation scales are smallest
    zeroed pass the contest rule (90 % matched) and are rejected by the default (strict) verdict."""
    b = definitions.get("moe").quick_variant()
    judged = 0
    for w in b.public_workloads():
        for seed in SEEDS:
            inputs = b.make_inputs(b.definition, w, make_generator(seed, "cpu"), torch.device("cpu"))
            expected = normalize_outputs(b.reference(**inputs), b.definition.output_names)
            name = b.definition.output_names[0]
            tokens = expected[name].shape[0]
            scale = inputs["hidden_states_scale"].float()
            per_token = scale.amax(dim=0) if scale.shape[-1] == tokens else scale.amax(dim=-1)
            smallest = torch.argsort(per_token)[:max(1, tokens // 10)]
            if tokens < 10 or not bool((expected[name][smallest].float().abs().sum(-1) > 0).any()):
                continue
            damaged = {k: v.clone() for k, v in expected.items()}
            damaged[name][smallest] = 0
            assert check_outputs(b.checker, damaged, expected, b.tolerance.contest_only(), inputs).passed
            verdict = check_outputs(b.checker, damaged, expected, b.tolerance, inputs)
            assert not verdict.passed and verdict.reason == "STRICT_TOLERANCE"
            judged += 1
    assert judged >= 3


def test_the_eager_floor_reads_a_zero_eager_latency_as_zero():
    """``redteam.runner._latency(host=True)``: a rejected trace's eager latency of 0.0 (a timer
    fooled to nothing) is the latency judged, not replaced by the headline (rt4)."""
    from types import SimpleNamespace as NS

    from kernelwright.redteam.runner import _latency

    def trace(notes):
        return NS(evaluation=NS(performance=None, gate=NS(notes=notes)))

    assert _latency(trace({"measured_eager_latency_ms": 0.0, "measured_latency_ms": 25.0}), host=True) == 0.0
    assert _latency(trace({"measured_latency_ms": 25.0}), host=True) == 25.0
    assert _latency(trace({"measured_eager_latency_ms": 21.0, "measured_latency_ms": 0.01})) == 0.01
