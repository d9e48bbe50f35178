"""A trace records only a commitment to the run's input nonce: traces are written while later
workloads run, and a worker that read the nonce there could compute every later input seed."""
import hashlib

from kernelwright.gate.evaluate import SolutionRun, evaluate


def test_a_trace_carries_the_nonces_hash_not_the_nonce(demo_cpu):
    cfg, ctx, session = demo_cpu
    trace = evaluate(SolutionRun(session, label="demo"), ctx)
    assert trace.passed, trace.evaluation.log
    notes = trace.evaluation.gate.notes
    assert notes["input_nonce_sha256"] == hashlib.sha256(cfg.nonce.encode()).hexdigest()
    assert cfg.nonce not in trace.model_dump_json()
