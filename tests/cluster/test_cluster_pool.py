"""The local pool with real pool worker processes on CPU pseudo-devices.

Same statuses as the sequential ``run_bench`` on the same plan; traces streamed to JSONL; a
pool worker killed mid-job is replaced and the job retried once (only the candidates not yet
reported), and a job whose worker dies twice ends as RUNTIME_ERROR traces.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from kernelwright.cluster import EvalJob, EvaluationPool, POOL_WORKER_CRASHED, run_bench_distributed
from kernelwright.gate.bench import Candidate
from kernelwright.trace import EvaluationStatus

from tests.cluster import cluster_helpers as H

pytestmark = pytest.mark.slow


def test_pool_on_pseudo_devices_matches_sequential(parity_plan, sequential, tmp_path):
    """Two CPU pseudo-devices (three only add process start-ups on a 2-core CI machine; the
    scheduling tests run three fake ones)."""
    progress = []
    run = run_bench_distributed(parity_plan, H.quick_config(), tmp_path, devices=["cpu", "cpu"],
                                progress=lambda desc, done, total: progress.append((desc, done, total)))
    seq = H.statuses(sequential)
    assert H.statuses(run) == seq
    # the sequential run itself is meaningful: one of each verdict
    assert sorted(set(seq.values())) == ["COMPILE_ERROR", "INCORRECT_NUMERICAL", "PASSED"]
    assert {s for (_, sol, _), s in seq.items() if sol == "rms_triton"} == {"PASSED"}
    # BenchRun in the sequential order, every trace streamed to the JSONL file
    assert [(t.workload.uuid, t.solution) for t in run.traces["demo_rmsnorm_h512__quick"]] == \
        [(t.workload.uuid, t.solution) for t in sequential.traces["demo_rmsnorm_h512__quick"]]
    lines = (tmp_path / "traces" / "demo_rmsnorm_h512__quick.jsonl").read_text().splitlines()
    assert len(lines) == 9
    devices = {json.loads(l)["evaluation"]["gate"]["notes"]["cluster"]["device"] for l in lines}
    assert devices == {"cpu#0", "cpu#1"}
    assert progress[-1] == ("done", 9, 9) and len(progress) == 10
    # gate workers log per pool worker
    assert any((tmp_path / "logs").rglob("*.log"))


def _wait_slot(pool, pred, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for slot in pool.slots():
            if pred(slot):
                return slot
        time.sleep(0.05)
    raise AssertionError(f"no slot matched within {timeout} s: {pool.slots()}")


def test_killed_pool_worker_is_replaced_and_the_job_retried_once(tmp_path):
    b = H.quick_builtin()
    cfg = H.quick_config()
    good, wrong = H.good(), H.wrong()
    notices = []
    with EvaluationPool(["cpu"], kind="cpu", log_root=str(tmp_path), notice=notices.append) as pool:
        # 1. killed while evaluating the 2nd candidate: the 1st trace is kept, the retry runs the 2nd
        job = EvalJob(b, b.public_workloads()[0], [Candidate(good, good.name), Candidate(wrong, wrong.name)], cfg)
        fut = pool.submit(job)
        slot = _wait_slot(pool, lambda l: l.job_id == job.job_id and l.candidate == wrong.name and l.attempt == 1)
        first_pid = slot.pid
        os.kill(first_pid, signal.SIGKILL)
        result = fut.result(300)
        assert result.attempts == 2 and len(result.crashes) == 1 and "SIGKILL" in result.crashes[0]
        kept, retried = result.traces
        assert kept.evaluation.status == EvaluationStatus.PASSED
        assert kept.evaluation.gate.notes["cluster"]["attempt"] == 1
        assert retried.evaluation.status == EvaluationStatus.INCORRECT_NUMERICAL
        assert retried.evaluation.gate.notes["cluster"]["attempt"] == 2
        slot = pool.slots()[0]
        assert slot.pid != first_pid and slot.restarts == 1 and slot.jobs_done == 1

        # 2. killed on the first run and on the retry: RUNTIME_ERROR, reason POOL_WORKER_CRASHED
        #    (a solution this worker has not built yet, so the kill lands while it is being built)
        other = H.wrong(1.25, "rms_triton_wrong_other")
        job2 = EvalJob(b, b.public_workloads()[1], [Candidate(other, other.name)], cfg)
        fut2 = pool.submit(job2)
        for attempt in (1, 2):
            slot = _wait_slot(pool, lambda l, a=attempt: l.job_id == job2.job_id and l.attempt == a
                                and l.state == "busy" and l.candidate)
            os.kill(slot.pid, signal.SIGKILL)
        result2 = fut2.result(300)
        (trace,) = result2.traces
        assert result2.attempts == 2
        assert trace.evaluation.status == EvaluationStatus.RUNTIME_ERROR
        assert trace.evaluation.gate.reasons == [POOL_WORKER_CRASHED]
        assert trace.evaluation.log.count("SIGKILL") == 2
        assert pool.slots()[0].restarts == 3

        # 3. the replaced worker still serves jobs
        ok = pool.submit(EvalJob(b, b.public_workloads()[1], [Candidate(good, good.name)], cfg)).result(300)
        assert ok.traces[0].evaluation.status == EvaluationStatus.PASSED and ok.attempts == 1
    assert any("retrying once" in n for n in notices)
    assert all(l.state == "closed" for l in pool.slots())
