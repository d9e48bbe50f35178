"""A trace records only a commitment to the run's input nonce: traces are written while later
workloads run, and a worker that read the nonce there could compute every later input seed."""
import hashlib

from kernelwright import definitions
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate
from kernelwright.gate.session import WorkerSession
from kernelwright.solutions import shipped_solutions


def test_a_trace_carries_the_nonces_hash_not_the_nonce(tmp_path):
    demo = definitions.get("demo").quick_variant()
    cfg = GateConfig(device="cpu", warmup=1, iterations=3, trials=1, graph_iterations=0, cupti_iterations=0)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    solution = shipped_solutions(definitions.get("demo").name)[0]
    session = WorkerSession(solution, "cpu", log_dir=tmp_path / "logs", protect=[])
    try:
        trace = evaluate(SolutionRun(session, label="demo"), ctx)
    finally:
        session.close()
        ctx.release()
    assert trace.passed, trace.evaluation.log
    notes = trace.evaluation.gate.notes
    assert notes["input_nonce_sha256"] == hashlib.sha256(cfg.nonce.encode()).hexdigest()
    assert cfg.nonce not in trace.model_dump_json()
