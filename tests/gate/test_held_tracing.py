"""CUPTI over the held timed calls (timing.HeldTracing, timing.read_traced_calls): every held call
past the warm-up is traced, so work a call hides from its events (a private stream never joined
back, host compute behind copies) shows in the records of the very call that was timed.  CPU
tests with records as CUPTI gives them; the GPU side is the red-team catalogue on CUDA."""
import gc

import pytest

from kernelwright.gate import guards
from kernelwright.gate import timing as T
from kernelwright.gate.headline import ClockTrials

US = 1_000   # ns


def _hold(t0, released):
    return T.KernelActivity(T.HOLD_KERNEL_NAME, t0 + 1 * US, released, 7)


def _read(windows, records, copies=(), traces_copies=True):
    out = T.TimingSamples()
    T.read_traced_calls(out, windows, list(records), list(copies), traces_copies)
    return out


def test_an_honest_call_reads_its_kernels_behind_the_hold():
    t0, rel = 0, 200 * US
    out = _read([(t0, 400 * US, True)], [_hold(t0, rel), T.KernelActivity("k1", rel + 2 * US, rel + 12 * US, 7),
                                         T.KernelActivity("k2", rel + 13 * US, rel + 20 * US, 7)])
    assert out.kernel_sum_ms == [pytest.approx(0.017)] and out.kernel_span_ms == [pytest.approx(0.018)]
    assert out.cupti_held == [True] and out.cupti_prerelease == [0] and out.cupti_hold_records == [0]
    assert out.cupti_d2h_bytes == [0] and out.cupti_prerelease_copies == [0]
    assert out.kernels == {"k1": [1, pytest.approx(10.0)], "k2": [1, pytest.approx(7.0)]}


def test_unjoined_private_stream_work_is_in_the_timed_calls_own_records_and_phase_mismatch():
    # case unjoined_small: a 40 us kernel on a private stream never joined back, a 2 us pad on the
    # harness's stream; the events read ~4 us.  Each window is the timed call itself
    windows, records = [], []
    for k in range(6):
        t0 = k * 1000 * US
        rel = t0 + 100 * US
        windows.append((t0, t0 + 500 * US, True))
        records += [_hold(t0, rel), T.KernelActivity("side", rel + 1 * US, rel + 41 * US, 9),
                    T.KernelActivity("pad", rel + 1 * US, rel + 3 * US, 7)]
    out = _read(windows, records)
    assert all(s == pytest.approx(0.040) for s in out.kernel_span_ms)
    trial = {"clock": "device", "latency_ms": [0.004] * 6, "latency_iters": list(range(2, 8)),
             "kernel_sum_ms": out.kernel_sum_ms, "kernel_span_ms": out.kernel_span_ms,
             "cupti_timed_iters": list(range(2, 8)), "cupti_copies_traced": True, "hold_kind": "blocking kernel"}
    clocks = ClockTrials()
    assert clocks.add(trial) is None
    reason, message = clocks.phase_mismatch()
    assert reason == guards.PHASE_MISMATCH and "0.10x" in message


def test_host_compute_behind_copies_refuses_device_time_in_the_timed_calls():
    # case cupti_aware_host_compute: the copies run in every held call, and every held call is traced
    t0, rel = 0, 100 * US
    copies = [T.CopyActivity(True, 4096, rel - 50 * US, rel - 40 * US), T.CopyActivity(False, 4096, rel - 20 * US, rel - 10 * US)]
    out = _read([(t0, 300 * US, True)], [_hold(t0, rel), T.KernelActivity("touch", rel + 1 * US, rel + 2 * US, 7)], copies)
    assert out.cupti_d2h_bytes == [4096] and out.cupti_prerelease_copies == [2]
    clocks = ClockTrials()
    clocks.add({"clock": "device", "latency_ms": [0.003], "latency_iters": [2], "cupti_copies_traced": True,
                "cupti_d2h_bytes": out.cupti_d2h_bytes, "cupti_prerelease_copies": out.cupti_prerelease_copies,
                "hold_kind": "blocking kernel"})
    h = clocks.decide()
    assert h.clock == "eager" and "device_time_refused" in h.notes


def test_early_kernels_a_second_hold_and_a_timed_out_hold():
    t0, rel = 0, 100 * US
    out = _read([(t0, 300 * US, True), (400 * US, 700 * US, False)],
                [_hold(t0, rel), T.KernelActivity("early", rel - 20 * US, rel + 5 * US, 9),
                 T.KernelActivity(T.HOLD_KERNEL_NAME, rel + 1 * US, rel + 9 * US, 9),
                 _hold(400 * US, 600 * US), T.KernelActivity("k", 601 * US, 610 * US, 7)])
    assert out.cupti_prerelease == [1] and out.cupti_prerelease_lead_us == [pytest.approx(20.0)]
    assert out.cupti_hold_records == [1, 0]              # the impostor named like the hold
    assert out.cupti_held == [True, False]               # the second call's hold timed out: not held
    assert len(out.cupti_prerelease) == 1                # early starts are read behind a released hold only
    assert len(out.kernel_sum_ms) == 2


class _FakeTracer:
    """CuptiKernelTracer's surface over the real record store (``timing._record_store``); CUPTI's
    buffer callback is ``deliver`` (at ``end``: its flush), or ``flush_now`` (one the solution forced)."""

    take = T.CuptiKernelTracer.take

    def __init__(self):
        self.now, self.begun, self.ended = 0, 0, 0
        self.traces_copies = True
        (self._records, self._copies), self._add, self._take = T._record_store()
        self.pending = []                               # (0 kernel | 1 copy, record) not yet delivered

    def begin(self):
        self.begun += 1

    def end(self):
        self.ended += 1
        self.flush_now()

    def flush_now(self):
        for which, record in self.pending:
            self._add(which, record)
        self.pending = []

    def timestamp(self):
        self.now += 100 * US
        return self.now


class _Launches:
    def __init__(self):
        self.counts = {"triton::k": [3, 1.0]}

    @property
    def by_name(self):
        return {k: list(v) for k, v in self.counts.items()}


def test_held_tracing_attaches_once_detaches_once_and_fills_one_entry_per_noted_call():
    tracer, launches = _FakeTracer(), _Launches()
    switched = []
    traced = T.HeldTracing(tracer, launches, (lambda: switched.append("off"), lambda: switched.append("on")))
    out = T.TimingSamples()
    traced.end(out)                                       # nothing begun: nothing happens
    assert tracer.ended == 0 and not switched
    for _ in range(3):
        t0 = traced.begin()
        tracer.pending.append((0, T.KernelActivity("k", t0 + 10, t0 + 20, 7)))
        launches.counts["triton::k"][0] += 1
        traced.note(t0, T.HOLD_RELEASED)
    assert tracer.begun == 1 and traced.calls == 3
    traced.end(out)
    traced.end(out)
    assert tracer.ended == 1 and switched == ["off", "on"]
    assert len(out.kernel_sum_ms) == 3 and out.cupti_copies_traced
    assert out.launched == {"triton::k": 3} and out.cupti_tampered == []
    assert out.cupti_held == [False] * 3                  # no hold record in the fake: not held


def _traced_op(tracer, launches, report, calls=3, between=None):
    """An op's traced held calls as Harness.op_time drives HeldTracing: each with a hold, one
    kernel ``k`` (launched through the counter) and a 4 KiB device-to-host copy; ``between(j)``
    runs after call j (the solution's code between two traced calls, or in a later call)."""
    traced = T.HeldTracing(tracer, launches, (gc.disable, gc.enable), report=report)
    for j in range(calls):
        t0 = traced.begin()
        rel = t0 + 10 * US
        tracer.pending += [(0, _hold(t0, rel)), (0, T.KernelActivity("k", rel + 1 * US, rel + 5 * US, 7)),
                           (1, T.CopyActivity(True, 4096, rel + 6 * US, rel + 7 * US))]
        launches.counts["triton::k"][0] += 1
        traced.note(t0, T.HOLD_RELEASED)
        if between is not None:
            between(j)
    return traced


def test_the_lists_reach_the_parent_before_any_solution_code_runs_again():
    # case forge_traced_lists: the solution zeroed the op's CUPTI copy lists through op_time's
    # frame in its first idle call, before the op's reply carried them.  Now they are sent from
    # inside end(), with the garbage collector still off (no finalizer in between), and what the
    # worker's lists say afterwards is only compared with the parent's copy
    import pickle

    sent, gc_on = [], []
    tracer = _FakeTracer()
    traced = _traced_op(tracer, _Launches(), lambda lists: (gc_on.append(gc.isenabled()),
                                                            sent.append(pickle.loads(pickle.dumps(lists)))))
    out = T.TimingSamples()
    traced.end(out)
    assert gc_on == [False] and gc.isenabled() and len(sent) == 1
    assert set(sent[0]) == set(T.TRACED_FIELDS)
    assert sent[0]["cupti_d2h_bytes"] == [4096] * 3 and sent[0]["cupti_held"] == [True] * 3
    assert sent[0]["launched"] == {"triton::k": 3} and sent[0]["kernels"]["k"][0] == 3
    out.cupti_d2h_bytes[:] = [0, 0, 0]                    # the forge, one call too late
    assert sent[0]["cupti_d2h_bytes"] == [4096] * 3


def test_what_the_samples_held_before_the_read_does_not_count():
    # lists pre-filled in the op's samples (through its frame, in a held call) are not appended to
    tracer = _FakeTracer()
    out = T.TimingSamples(kernel_sum_ms=[9.9, 9.9], cupti_d2h_bytes=[0, 0])
    _traced_op(tracer, _Launches(), lambda lists: None, calls=2).end(out)
    assert out.cupti_d2h_bytes == [4096, 4096] and len(out.kernel_sum_ms) == 2 and 9.9 not in out.kernel_sum_ms


class _Drop(list):
    def append(self, item):
        return None


def test_a_rebound_record_list_is_reported_and_the_records_still_read():
    # case tracer_drop_records: the tracer's copy list rebound to one whose append drops the records
    tracer = _FakeTracer()

    def swap(j):
        tracer._copies = _Drop()

    out = T.TimingSamples()
    _traced_op(tracer, _Launches(), lambda lists: None, between=swap).end(out)
    assert out.cupti_d2h_bytes == [4096] * 3              # the callback fills the store's own list
    assert out.cupti_tampered and "copy records were replaced by a _Drop" in out.cupti_tampered[0]


def test_records_taken_out_after_a_forced_flush_are_reported():
    # a solution that flushes CUPTI itself in a held call, then empties the list it reaches
    tracer = _FakeTracer()

    def flush_and_clear(j):
        if j == 1:
            tracer.flush_now()
            tracer._copies.clear()

    out = T.TimingSamples()
    _traced_op(tracer, _Launches(), lambda lists: None, between=flush_and_clear).end(out)
    assert out.cupti_tampered == ["the CUPTI tracer's copy records were edited: 1 held, 3 delivered"]
    with pytest.raises(AttributeError):                   # and a record cannot be edited in place
        T.CopyActivity(True, 4096, 0).bytes = 0


def test_only_launches_inside_the_traced_calls_count():
    # a launch between two traced calls (a prepare hook, the gate's own work) has no record in any
    # call's window: it must not be counted as launched there (guards.unrecorded_launches)
    tracer, launches = _FakeTracer(), _Launches()

    def launch_between(j):
        launches.counts.setdefault("triton::prep", [0, 0.0])[0] += 5

    out = T.TimingSamples()
    _traced_op(tracer, launches, lambda lists: None, between=launch_between).end(out)
    assert out.launched == {"triton::k": 3}


def test_the_worker_traces_held_calls_past_the_warmup_and_ends_before_the_idle_ones(monkeypatch):
    # Harness._held_tracing's rules, without a GPU: no tracing off CUDA or without a hold
    from kernelwright.gate.worker import Harness

    h = Harness.__new__(Harness)
    h.hold = None
    out = T.TimingSamples()
    assert h._held_tracing({"trace_held": True}, False, out) is None and out.cupti_error is None
    assert h._held_tracing({"trace_held": True}, True, out) is None and "no stream hold" in out.cupti_error
    assert h._held_tracing({"trace_held": False}, True, T.TimingSamples()) is None
    assert gc.isenabled()
