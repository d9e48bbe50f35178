"""``time_only`` (the clock for lower-bound entries, e.g. DeepGEMM's two GEMMs alone) speaks the
same per-iteration exchange as ``evaluate``: it returns a latency, and checks nothing."""
from kernelwright.gate.evaluate import SolutionRun, time_only


def test_time_only_runs_the_exchange_on_cpu(demo_cpu):
    _, ctx, session = demo_cpu
    ms = time_only(SolutionRun(session, requires_kernel=False, label="demo"), ctx)
    assert ms is not None and ms > 0
