"""Fixtures of the gate's tests."""

import pytest

from kernelwright import definitions
from kernelwright.gate.evaluate import GateConfig, WorkloadContext
from kernelwright.gate.session import WorkerSession
from kernelwright.solutions import shipped_solutions


@pytest.fixture
def demo_cpu(tmp_path):
    """(config, context, session) for the shipped demo solution on its first quick workload, on
    the CPU with a short protocol (1 warm-up, 3 timed iterations, 1 trial, no graph or CUPTI
    phase); the session is closed and the context released afterwards."""
    demo = definitions.get("demo").quick_variant()
    cfg = GateConfig(device="cpu", warmup=1, iterations=3, trials=1, graph_iterations=0, cupti_tracing=False)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    session = WorkerSession(shipped_solutions(definitions.get("demo").name)[0], "cpu", log_dir=tmp_path / "logs",
                            protect=[])
    try:
        yield cfg, ctx, session
    finally:
        session.close()
        ctx.release()
