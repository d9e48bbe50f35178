"""Candidates of one run never run side by side: while one is evaluated, the workers of the others
are stopped (``session.focus``; docs/gate.md section 3, item 14: a candidate's thread framed a rival
with FILE_TAMPERED and stopped a rival's worker in a red-team pass of 2026-11-30)."""
import sys
import time

import pytest

from kernelwright import definitions
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate, time_only
from kernelwright.gate.session import WorkerSession, focus
from kernelwright.solutions import shipped_solutions

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _state(pid: int, want: str = "T", wait_s: float = 3.0) -> str:
    """The process state (R, S, T = stopped, ...), polled until it is ``want`` or ``wait_s`` passed
    (a signal takes effect asynchronously)."""
    deadline = time.monotonic() + wait_s
    while True:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        if state == want or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_focus_stops_the_other_workers_and_requests_resume_them(tmp_path):
    demo = definitions.get("demo").quick_variant()
    cfg = GateConfig(device="cpu", warmup=1, iterations=2, trials=1, graph_iterations=0, cupti_tracing=False)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    solution = shipped_solutions(definitions.get("demo").name)[0]
    a = WorkerSession(solution, "cpu", log_dir=tmp_path / "a", protect=[])
    b = WorkerSession(solution, "cpu", log_dir=tmp_path / "b", protect=[])
    try:
        assert a.start().get("ok") and b.start().get("ok")
        focus([a, b], a)
        assert _state(b.worker_pid) == "T" and _state(a.worker_pid, wait_s=0) != "T"
        assert time_only(SolutionRun(a, requires_kernel=False, label="a"), ctx) > 0
        assert _state(b.worker_pid) == "T"                       # stayed stopped while a was timed
        # a request to a stopped worker resumes it first (no deadlock if a caller forgets focus)
        assert time_only(SolutionRun(b, requires_kernel=False, label="b"), ctx) > 0
        assert _state(b.worker_pid, wait_s=0) != "T"
        focus([a, b], b)
        assert _state(a.worker_pid) == "T"
    finally:
        a.close()
        b.close()
        ctx.release()
    assert not a.alive and not b.alive                          # close resumes, then ends the worker


def test_a_worker_lets_go_of_its_buffers_after_each_workload(tmp_path):
    """``release_buffers`` after a workload: the worker drops the buffer sets it allocated (a bench's
    paused workers held 10-22 GB each on CUDA without it), so a release sent afterwards finds none."""
    demo = definitions.get("demo").quick_variant()
    cfg = GateConfig(device="cpu", warmup=1, iterations=2, trials=1, graph_iterations=0, cupti_tracing=False)
    ctx = WorkloadContext(demo, demo.public_workloads()[0], cfg)
    solution = shipped_solutions(definitions.get("demo").name)[0]
    session = WorkerSession(solution, "cpu", log_dir=tmp_path / "w", protect=[])
    try:
        assert session.start().get("ok")
        reply = session.request({"op": "alloc", "sets": 2, "samples": 1, "inputs": ctx.input_meta,
                                 "outputs": ctx.output_meta}, 60)
        assert reply.get("ok")
        per_set = sum(1 for _, shape, _ in ctx.input_meta if shape is not None) + len(ctx.output_meta)
        released = session.request({"op": "release"}, 60)
        assert released.get("ok") and released["dropped"] == 2 * per_set + len(ctx.output_meta)
        assert not released["tampered"]
        assert time_only(SolutionRun(session, requires_kernel=False, label="demo"), ctx) > 0
        assert session.request({"op": "release"}, 60)["dropped"] == 0   # time_only released its sets
        trace = evaluate(SolutionRun(session, requires_kernel=False, label="demo"), ctx)
        assert trace.evaluation.status.value == "PASSED"
        assert session.request({"op": "release"}, 60)["dropped"] == 0   # and so did evaluate
    finally:
        session.close()
        ctx.release()
