"""Tamper detection (integrity snapshots) and the timed iterations' input specs (fresh inputs,
twins)."""

import random
import statistics
import time

import pytest
import torch

from kernelwright.gate import fresh, integrity


def test_integrity_sees_rebinding_code_swaps_and_shadowing():
    snap = integrity.capture()
    assert integrity.changed(snap) == []
    original = time.perf_counter
    original_median = statistics.median
    try:
        time.perf_counter = lambda: 0.0
        labels = integrity.changed(snap)
        assert "time.perf_counter" in labels
        timer, other = integrity.split(labels)
        assert "time.perf_counter" in timer and not other
    finally:
        time.perf_counter = original
    assert integrity.changed(snap) == []
    # swapping a function's code in place
    code = statistics.median.__code__
    try:
        statistics.median.__code__ = (lambda data: 0).__code__
        assert "statistics.median.__code__" in integrity.changed(snap)
    finally:
        statistics.median.__code__ = code
    assert statistics.median is original_median and integrity.changed(snap) == []
    # shadowing an inherited tensor method on the Python subclass
    try:
        torch.Tensor.copy_ = lambda self, other: self
        assert "torch.Tensor.copy_" in integrity.changed(snap)
    finally:
        del torch.Tensor.copy_
    assert integrity.changed(snap) == []


def test_integrity_gate_modules_and_accept():
    from kernelwright.gate import timing, worker

    snap = integrity.capture()
    saved = worker.T
    try:
        worker.T = object()
        _, other = integrity.split(integrity.changed(snap))
        assert "kernelwright.gate.worker.T" in other
    finally:
        worker.T = saved
    saved_now = timing.now_s
    try:
        timing.now_s = lambda: 0.0
        labels = integrity.changed(snap)
        assert integrity.split(labels)[0] == ["kernelwright.gate.timing.now_s"]
        integrity.accept(snap, labels)             # the gate's own change: accepted
        assert integrity.changed(snap) == []
    finally:
        timing.now_s = saved_now


def test_integrity_harness_attributes():
    class H:
        def __init__(self):
            self.flusher = object()
            self.fn = None

    h = H()
    snap = integrity.capture(h)
    h.fn = print
    assert "harness.fn" in integrity.changed(snap)
    integrity.rebase(snap, h, ("fn",))
    assert integrity.changed(snap) == []
    h.flusher = object()
    assert "harness.flusher" in integrity.changed(snap)


def test_integrity_watches_the_clock_objects_and_the_snapshot_itself():
    # red-team review of 2026-12-02: a solution that reaches the harness through its frames could
    # replace the hold (hiding work in a wrapped begin()), the stream pin, or the snapshot the
    # per-iteration checks read
    class Hold:
        def __init__(self):
            self.epoch, self.limit_ns, self._function = 0, 50_000_000, object()

        def begin(self, stream):
            self.epoch += 1

    class Pin:
        def __init__(self):
            self.stream = object()

    class H:
        def __init__(self):
            self.flusher, self.hold, self.stream_pin = object(), Hold(), Pin()

    h = H()
    snap = integrity.capture(h)
    h._integrity = snap
    integrity.watch(snap, h, "_integrity")
    h.hold.begin(None)                       # the hold's own counter moves: not a change
    assert integrity.changed(snap) == []
    h.hold.limit_ns = 10**15
    assert "harness.hold.limit_ns" in integrity.changed(snap)
    h.hold.limit_ns = snap.extra["harness.hold.limit_ns"][1]
    h.hold.begin = lambda stream: None       # an instance attribute shadowing the method
    assert any("harness.hold.begin" in x for x in integrity.changed(snap))
    del h.hold.begin
    h.stream_pin = Pin()
    assert "harness.stream_pin" in integrity.changed(snap)
    h.stream_pin = snap.extra["harness.stream_pin"][1]
    h._integrity = None
    assert integrity.changed(snap) == ["harness._integrity"]


def test_the_message_loops_closures_that_hold_the_pipe_are_compared():
    """``harness._report_op`` (the host-op recorder's channel to the parent) and ``harness._step``
    reach the pipe through their closures: a cell swapped in place, so that records go nowhere
    while the function stays the same object, is a change."""
    sent = []

    def send(message):
        sent.append(message)

    def report_op(name, us, elements):
        send({"host_op": (name, us, elements)})

    class H:
        def __init__(self):
            self.flusher, self._report_op = object(), report_op

    snap = integrity.capture(H())
    assert integrity.changed(snap) == []
    cell = report_op.__closure__[0]          # the cell of ``send`` (shared with this frame)
    real = cell.cell_contents
    cell.cell_contents = lambda message: None
    assert integrity.changed(snap) == ["harness._report_op.__code__"]
    cell.cell_contents = real
    assert integrity.changed(snap) == []


@pytest.fixture(scope="module")
def demo():
    from kernelwright import definitions

    b = definitions.get("demo").quick_variant()
    return b, b.public_workloads()[1]


def test_fresh_expand_is_deterministic_and_twins_change_one_block(demo):
    b, w = demo
    dev = torch.device("cpu")
    a, a2 = fresh.expand(b, w, 11, dev), fresh.expand(b, w, 11, dev)
    assert torch.equal(a["x"], a2["x"]) and torch.equal(a["weight"], a2["weight"])
    assert not torch.equal(a["x"], fresh.expand(b, w, 12, dev)["x"])
    n = a["x"].numel()
    twin = fresh.expand(b, w, [11, 99, "x", 5, 40], dev)
    diff = (twin["x"].view(-1) != a["x"].view(-1)).nonzero().view(-1)
    assert diff.numel() > 0 and int(diff.min()) >= 5 and int(diff.max()) < 45
    assert torch.equal(twin["weight"], a["weight"]) and twin["eps"] == a["eps"]
    assert fresh.key([11, 99, "x", 5, 40]) == (11, 99, "x", 5, 40) and n == 7 * 512


def test_twin_plan(demo):
    b, w = demo
    meta = [("x", [7, 512], "bfloat16"), ("weight", [512], "bfloat16"), ("eps", None, "float32")]
    assert fresh.twin_target(meta) == ("x", 7 * 512)
    assert fresh.twin_target([("idx", [4], "int32")]) is None
    seeds = list(range(100, 112))
    specs, j = fresh.plan_trial(seeds, warmup=2, nsets=2, input_meta=meta, ratio=1.0, rng=random.Random(0), donor_seed=7)
    assert j is not None and j >= 4 and isinstance(specs[j], list)
    assert specs[j][0] == seeds[j - 2] and specs[j][1] == 7 and specs[j][2] == "x"
    assert all(specs[i] == seeds[i] for i in range(len(seeds)) if i != j)
    # too few iterations for a twin on the same buffer set
    assert fresh.plan_trial(seeds[:3], 2, 2, meta, 1.0, random.Random(0), 7)[1] is None
    assert fresh.twin_fraction(1.0) == pytest.approx(1 / 16) and fresh.twin_fraction(0.9) == pytest.approx(0.25)


def test_workload_context_checks_every_twin(demo):
    from kernelwright.gate.evaluate import GateConfig, WorkloadContext

    b, w = demo
    ctx = WorkloadContext(b, w, GateConfig(device="cpu", warmup=1, iterations=4, trials=3))
    for t in range(3):
        # the twin is always checked; the other checked iteration is drawn by the worker after the call
        assert ctx.twins[t] is not None and ctx.sample_plan[t] == {ctx.twins[t]: 0}
        assert ctx.random_samples[t] == 1
    off = WorkloadContext(b, w, GateConfig(device="cpu", warmup=1, iterations=4, trials=1, guards=False))
    assert off.twins == [None] and off.sample_plan == [{}] and off.random_samples == [0]


def test_hooks_installed_after_the_snapshot_are_reported():
    import gc
    import sys

    from torch.overrides import TorchFunctionMode

    from kernelwright.gate import integrity

    snap = integrity.capture()
    assert not integrity.hooks_installed(snap)
    sys.setprofile(lambda *a: None)
    try:
        assert "hook: sys.setprofile" in integrity.changed(snap)
    finally:
        sys.setprofile(None)
    cb = lambda phase, info: None  # noqa: E731
    gc.callbacks.append(cb)
    try:
        assert "hook: gc.callbacks" in integrity.hooks_installed(snap)
    finally:
        gc.callbacks.remove(cb)
    with TorchFunctionMode():
        assert "hook: torch function mode" in integrity.hooks_installed(snap)
    assert not integrity.hooks_installed(snap)


def test_definitions_that_cannot_be_snapshotted_are_reported(monkeypatch):
    """A definition the snapshot cannot list is named in ``Snapshot.gaps`` (issue 25: it was
    dropped silently)."""
    from kernelwright import definitions

    assert integrity.capture().gaps == []
    real = definitions.all_builtins()

    class Opaque:                      # no __dict__: vars() raises TypeError
        __slots__ = ()
        name = "opaque_def"

    monkeypatch.setattr(definitions, "all_builtins", lambda *a, **k: real + [Opaque()])
    gaps = integrity.capture().gaps
    assert len(gaps) == 1 and gaps[0].startswith("definition opaque_def: TypeError")
    assert integrity.gap_concerns(gaps, "opaque_def") == gaps
    assert integrity.gap_concerns(gaps, real[0].name) == []

    def broken(*a, **k):
        raise RuntimeError("cannot list")

    monkeypatch.setattr(definitions, "all_builtins", broken)
    gaps = integrity.capture().gaps
    assert gaps == [f"{integrity.ALL_DEFINITIONS}: all_builtins() raised RuntimeError: cannot list"]
    assert integrity.gap_concerns(gaps, real[0].name) == gaps


def test_globals_of_a_definitions_module_are_watched(monkeypatch):
    """A global that a definition's functions look up at each call (demo's ``make_inputs`` reaches
    ``random_tensor``, MoE's ``make_shared_inputs`` the routing synthesis) rebound in the
    definition's module is reported (red-team case ``inputs_global_hook``: it was not)."""
    import sys

    from kernelwright import definitions

    definitions.get("moe")
    snap = integrity.capture()
    assert integrity.changed(snap) == []
    for mod_name, attr in (("kernelwright.definitions.demo_rmsnorm", "random_tensor"),
                           ("kernelwright.definitions.moe_fp8", "synth_routing_logits")):
        mod = sys.modules[mod_name]
        original = getattr(mod, attr)
        monkeypatch.setattr(mod, attr, lambda *a, _f=original, **k: _f(*a, **k))
        _, other = integrity.split(integrity.changed(snap))
        assert f"{mod_name}.{attr}" in other
        monkeypatch.setattr(mod, attr, original)
        assert integrity.changed(snap) == []


def test_the_parent_rejects_an_evaluation_whose_definition_was_not_snapshotted():
    from kernelwright import definitions
    from kernelwright.gate import guards
    from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate
    from kernelwright.gate.session import Timeouts
    from kernelwright.solutions import shipped_solutions

    demo = definitions.get("demo").quick_variant()

    class LoadedSession:               # what evaluate reads of a worker that has loaded
        alive, proc = True, object()
        solution = shipped_solutions(definitions.get("demo").name)[0]

        def __init__(self, gaps):
            self.load_reply = {"ok": True, "integrity_gaps": gaps}

        def new_log(self):
            return ""

        timeouts = Timeouts()

        def request(self, msg, timeout_s, on_step=None):   # the release after the workload
            assert msg == {"op": "release"}
            return {"ok": True}

    cfg = GateConfig(device="cpu", warmup=1, iterations=2, trials=1, graph_iterations=0, cupti_tracing=False)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    trace = evaluate(SolutionRun(LoadedSession([f"definition {demo.base_name}: TypeError: x"])), ctx)
    assert not trace.passed and trace.evaluation.gate.reasons == [guards.INTEGRITY_INCOMPLETE]
    assert "misses this definition" in trace.evaluation.log


# -- shared inputs: what sets the cost is the same for every candidate of a run ------------------
@pytest.fixture(scope="module")
def moe():
    from kernelwright import definitions

    b = definitions.get("moe").quick_variant()
    return b, b.quick_workloads()[1]


def test_a_shared_spec_takes_the_shared_inputs_from_the_shared_seed(moe):
    from kernelwright.inputs import make_generator

    b, w = moe
    dev = torch.device("cpu")
    own, mixed = fresh.expand(b, w, 11, dev), fresh.expand(b, w, fresh.shared_spec(11, 5), dev)
    routing = b.make_shared_inputs(b.definition, w, make_generator(5, dev), dev)
    assert set(b.shared_inputs) == {"routing_logits", "routing_bias"} == set(routing)
    for name in b.shared_inputs:
        assert torch.equal(mixed[name], routing[name]) and not torch.equal(mixed[name], own[name])
    for name in set(own) - set(b.shared_inputs):
        same = torch.equal(own[name], mixed[name]) if isinstance(own[name], torch.Tensor) else own[name] == mixed[name]
        assert same, name
    # a twin whose base is a shared spec: the base's inputs, one block of the target changed
    twin_spec = [fresh.shared_spec(11, 5), 99, "hidden_states", 3, 10]
    twin = fresh.expand(b, w, twin_spec, dev)
    assert torch.equal(twin["routing_logits"], routing["routing_logits"])
    changed = (twin["hidden_states"].view(torch.uint8).view(-1) != mixed["hidden_states"].view(torch.uint8).view(-1))
    assert changed.any() and not changed[:3].any() and not changed[13:].any()
    assert fresh.is_twin(twin_spec) and not fresh.is_twin(fresh.shared_spec(1, 2)) and not fresh.is_twin(7)
    assert hash(fresh.key(twin_spec)) == hash(fresh.key([["shared", 11, 5], 99, "hidden_states", 3, 10]))


def test_a_shared_spec_needs_shared_inputs(demo):
    b, w = demo
    with pytest.raises(ValueError, match="no shared inputs"):
        fresh.expand(b, w, fresh.shared_spec(1, 2), torch.device("cpu"))


def test_candidates_share_the_cost_inputs_and_nothing_else(moe, demo):
    from kernelwright.gate.evaluate import GateConfig, WorkloadContext, held_timed_iterations

    b, w = moe
    cfg = GateConfig(device="cpu", warmup=2, iterations=6, trials=2, graph_iterations=2)
    ctx = WorkloadContext(b, w, cfg)
    assert ctx.shares_cost_inputs
    one, two = ctx.plan_for("a:1"), ctx.plan_for("b:2")
    for t in range(cfg.trials):
        for s1, s2 in zip(one.timing_seeds[t], two.timing_seeds[t]):
            assert s1[0] == s2[0] == fresh.SHARED and s1[2] == s2[2] and s1[1] != s2[1]
        assert len({s[2] for s in one.timing_seeds[t]}) == len(one.timing_seeds[t])   # fresh every iteration
    assert one.timing_seeds[0][0][2] != one.timing_seeds[1][0][2]                      # and every trial
    # the graph replays run on trial 0's held iterations, shared specs included
    held = [one.timing_specs[0][i] for i in held_timed_iterations(cfg.warmup, len(one.timing_specs[0]))
            if not fresh.is_twin(one.timing_specs[0][i])]
    assert one.graph_seeds == held[:cfg.graph_iterations] and one.graph_seeds[0][0] == fresh.SHARED
    # a definition without shared inputs keeps plain seeds, one set per candidate
    d, dw = demo
    plain = WorkloadContext(d, dw, cfg)
    assert not plain.shares_cost_inputs and all(isinstance(s, int) for s in plain.plan_for("a:1").timing_seeds[0])


def test_a_closure_cell_swapped_in_place_changes_the_function_state():
    """A listed function's closure cells (and those of the functions they hold) are part of what
    the snapshot compares: the launch counter's wrapper reaches the jit-body check through them
    (red-team case ``interp_gate_closure_cells``)."""
    check = object()

    def inner():
        return check

    def outer():
        return inner()

    kept = check
    before = integrity._function_state(outer)
    assert integrity._function_state(outer) == before
    inner.__closure__[0].cell_contents = None          # the check switched off, two cells down
    assert integrity._function_state(outer) != before
    inner.__closure__[0].cell_contents = kept          # put back: the same state again
    assert integrity._function_state(outer) == before
