"""``time_only`` (the clock for lower-bound entries, e.g. DeepGEMM's two GEMMs alone) speaks the
same per-iteration exchange as ``evaluate``: it returns a latency, and checks nothing."""
from kernelwright import definitions
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, time_only
from kernelwright.gate.session import WorkerSession
from kernelwright.solutions import shipped_solutions


def test_time_only_runs_the_exchange_on_cpu(tmp_path):
    demo = definitions.get("demo").quick_variant()
    cfg = GateConfig(device="cpu", warmup=1, iterations=3, trials=1, graph_iterations=0, cupti_iterations=0)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    solution = shipped_solutions(definitions.get("demo").name)[0]
    session = WorkerSession(solution, "cpu", log_dir=tmp_path / "logs", protect=[])
    try:
        ms = time_only(SolutionRun(session, requires_kernel=False, label="demo"), ctx)
    finally:
        session.close()
        ctx.release()
    assert ms is not None and ms > 0
