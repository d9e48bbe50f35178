"""The OS boundary on the GPU (docs/gate.md section 1): a CUDA worker behind the default level
(``mount``) starts, shares its buffers with the parent as file descriptors
(``KERNELWRIGHT_CUDA_SHARING=fd``, gate/cuda_share.py), holds the stream for device time, and its
trace records the level; with torch's legacy CUDA IPC (the default, "ipc") the worker falls back
with the reason (on the H200 2026-12-02 to ``none``: the parent cannot open the handle across the
uid change); asking for ``full`` either works or falls back with the reason.  Run on the H200:
``python -m pytest -q -m gpu tests/gate/test_boundary_gpu.py``."""

import contextlib
import os

import pytest

from kernelwright.gate import sandbox

pytestmark = pytest.mark.gpu


def _demo_solution():
    from kernelwright import definitions
    from kernelwright.solutions import shipped_solutions

    return shipped_solutions(definitions.get("demo").name)[0]


@contextlib.contextmanager
def _session(tmp_path, monkeypatch, isolation, sharing):
    """A demo worker session on CUDA at ``isolation`` (None: the default level) with CUDA buffers
    shared by ``sharing`` ("fd" or "ipc"), closed afterwards."""
    from kernelwright.gate import cuda_share
    from kernelwright.gate.session import WorkerSession

    if isolation is None:
        monkeypatch.delenv(sandbox.ENV, raising=False)
    else:
        monkeypatch.setenv(sandbox.ENV, isolation)
    monkeypatch.setenv(cuda_share.MODE_ENV, sharing)
    session = WorkerSession(_demo_solution(), "cuda", log_dir=tmp_path / "logs")
    try:
        yield session
    finally:
        session.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the boundary needs root")
def test_a_cuda_worker_passes_behind_the_mount_boundary(tmp_path, monkeypatch):
    from kernelwright import definitions
    from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate

    with _session(tmp_path, monkeypatch, None, "fd") as session:
        demo = definitions.get("demo").quick_variant()
        cfg = GateConfig(device="cuda", warmup=2, iterations=6, trials=2, graph_iterations=3)
        trace = evaluate(SolutionRun(session), WorkloadContext(demo, demo.public_workloads()[0], cfg))
        note = trace.evaluation.gate.notes["isolation"]
        assert note["requested"] == "mount" and note["level"] == "mount", note
        assert not note.get("fallbacks") and note.get("self_test") == "passed", note
        assert trace.passed, (trace.evaluation.gate.reasons, trace.evaluation.log[-2000:])
        assert trace.evaluation.performance.clock == "device", trace.evaluation.gate.notes.get("clock")


@pytest.mark.skipif(os.geteuid() != 0, reason="the boundary needs root")
def test_legacy_cuda_ipc_starts_or_falls_back_with_the_reason(tmp_path, monkeypatch):
    with _session(tmp_path, monkeypatch, None, "ipc") as session:
        assert session.start().get("ok")
        note = session.boundary.as_note()
        if note["level"] != "mount":
            assert note["fallbacks"] and all("did not start" in f for f in note["fallbacks"]), note


@pytest.mark.skipif(os.geteuid() != 0, reason="the boundary needs root")
def test_full_on_cuda_starts_or_falls_back_with_the_reason(tmp_path, monkeypatch):
    with _session(tmp_path, monkeypatch, "full", "fd") as session:
        assert session.start().get("ok")
        note = session.boundary.as_note()
        assert note["level"] in ("full", "mount"), note
        if note["level"] == "mount":
            assert note["fallbacks"] and note["fallbacks"][0].startswith("full:"), note
