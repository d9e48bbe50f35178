"""The pool's scheduling, streaming, retry and slot logic with in-process fake workers (fast).

The fake replaces the pool worker process; everything else (queue, slots, retry-once, the
RUNTIME_ERROR traces after a second loss, JSONL streaming in run_bench_distributed) is the
real code.  The same paths with real processes are in test_cluster_pool.py.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Dict, List

import pytest

from kernelwright.cluster import jobs as J
from kernelwright.cluster import pool as P
from kernelwright.cluster.devices import resolve_devices
from kernelwright.cluster.local import WorkerLost
from kernelwright.gate.bench import Candidate
from kernelwright.trace import Environment, EvaluationStatus

from tests.cluster import cluster_helpers as H


class Script:
    """What the fake workers do: crash when a given (job, attempt, candidate index) starts."""

    def __init__(self):
        self.crash_at: set = set()            # {(job_id, attempt, index)}
        self.error_for: set = set()           # job ids whose trusted side fails
        self.wires: List[Dict[str, Any]] = []
        self.start_failures: Dict[str, int] = {}   # slot label -> starts that fail
        self.seen_slots: List[List[P.SlotStatus]] = []
        self.pool = None
        self.delay = 0.0
        self.before_job = None     # called with the wire before a job runs


SCRIPT = Script()


class FakeWorker:
    backend = "local"

    def __init__(self, slot, name, **kwargs):
        self.slot, self.name = slot, name
        self._alive = False
        self.info: Dict[str, Any] = {}

    device = property(lambda self: self.slot.label)
    pid = property(lambda self: 4242 if self._alive else None)
    alive = property(lambda self: self._alive)

    def start(self):
        left = SCRIPT.start_failures.get(self.slot.label, 0)
        if left:
            SCRIPT.start_failures[self.slot.label] = left - 1
            raise WorkerLost(f"fake start failure on {self.slot.label}")
        self._alive = True
        env = Environment(hardware="fake", libs={}).model_dump_json()
        self.info = {"pid": 4242, "host": "fakehost", "device": self.slot.label, "environment": env}
        return self.info

    def run(self, wire, on_event, inactivity_s):
        SCRIPT.wires.append(wire)
        if SCRIPT.before_job:
            SCRIPT.before_job(wire)
        for cand in wire["candidates"]:
            on_event({"op": "started", "index": cand["index"], "label": cand["label"]})
            if SCRIPT.pool is not None:
                SCRIPT.seen_slots.append(SCRIPT.pool.slots())
            if SCRIPT.delay:
                time.sleep(SCRIPT.delay)
            if (wire["job_id"], wire["attempt"], cand["index"]) in SCRIPT.crash_at:
                self._alive = False
                raise WorkerLost(f"fake worker on {self.slot.label} killed")
            if wire["job_id"] in SCRIPT.error_for:
                on_event({"op": "error", "error": "Traceback: reference exploded"})
                break
            trace = _fake_trace(wire, cand, self.slot.label)
            on_event({"op": "trace", "index": cand["index"], "trace": trace.model_dump_json()})
        on_event({"op": "done", "seconds": 0.0, "loaded": ["h-" + c["label"] for c in wire["candidates"]]})

    def kill(self):
        self._alive = False

    def stop(self, timeout_s=30.0):
        self._alive = False


def _fake_trace(wire, cand, device):
    """A trace as a worker would send it (RUNTIME_ERROR with a marker reason: no real run)."""
    from kernelwright.gate.evaluate import GateConfig
    from kernelwright.trace import Solution, Workload

    sol = Solution.model_validate_json(cand["solution"])
    job = J.EvalJob(H.quick_builtin(), Workload.model_validate_json(wire["workload"]),
                    [Candidate(sol, cand["label"])], GateConfig(**wire["cfg"]))
    t = J.failure_trace(job, 0, "FAKE_RUN", "fake", None, device)
    t.evaluation.gate.notes["cluster"] = {"device": device, "attempt": wire["attempt"], "job": wire["job_id"]}
    return t


@pytest.fixture()
def fake(monkeypatch):
    global SCRIPT
    SCRIPT = Script()
    monkeypatch.setattr(P, "LocalWorker", FakeWorker)
    notices: List[str] = []
    yield SCRIPT, notices


def _pool(notices, n=1, **kw):
    pool = P.EvaluationPool(["cpu"] * n, kind="cpu", notice=notices.append, **kw)
    SCRIPT.pool = pool
    assert pool.wait_ready(30)
    return pool


def _job(cands, workload=0, **kw):
    b = H.quick_builtin()
    return J.EvalJob(b, b.public_workloads()[workload], [Candidate(s, s.name) for s in cands], H.quick_config(), **kw)


# -- devices -------------------------------------------------------------------------------
def test_resolve_devices_pins_one_physical_gpu_per_slot(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")
    slots = resolve_devices("0,2", "cuda", visible=3)
    assert [s.label for s in slots] == ["cuda:0", "cuda:2"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["4", "7"]   # the parent's view is honoured
    assert all(s.gate_device == "cuda:0" for s in slots)                  # one GPU visible inside
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [s.physical for s in resolve_devices(2, "cuda", visible=8)] == ["0", "1"]
    assert [s.label for s in resolve_devices(None, "cuda", visible=3)] == ["cuda:0", "cuda:1", "cuda:2"]
    cpu = resolve_devices(["cpu", "cpu", "cpu"], "cpu")
    assert [s.label for s in cpu] == ["cpu#0", "cpu#1", "cpu#2"] and all(s.gate_device == "cpu" for s in cpu)
    with pytest.raises(ValueError, match="same GPU twice"):
        resolve_devices(["cuda:1", "cuda:1"], "cuda", visible=2)
    with pytest.raises(ValueError, match="not visible"):
        resolve_devices(["cuda:5"], "cuda", visible=2)
    with pytest.raises(ValueError, match="all cuda or all cpu"):
        resolve_devices(["cuda:0", "cpu"], "cuda", visible=2)
    with pytest.raises(ValueError, match="requested"):
        resolve_devices(4, "cuda", visible=2)


def test_job_wire_carries_the_definition_by_locator():
    job = _job([H.good(), H.wrong()])
    wire = J.job_wire(job, skip=[0], attempt=2)
    json.dumps(wire)                                      # plain JSON: crosses processes and machines
    assert wire["definition"] == {"locator": "demo_rmsnorm_h512__quick", "name": "demo_rmsnorm_h512__quick"}
    assert [c["index"] for c in wire["candidates"]] == [1] and wire["attempt"] == 2
    assert J.load_definition_ref(wire["definition"]).name == job.builtin.name


# -- pool logic ----------------------------------------------------------------------------
def test_retry_once_resumes_with_the_candidates_not_yet_reported(fake):
    script, notices = fake
    pool = _pool(notices)
    job = _job([H.good(), H.wrong()])
    script.crash_at.add((job.job_id, 1, 1))            # dies while evaluating the second candidate
    arrived = []
    result = pool.submit(job, on_trace=lambda j, i, t: arrived.append((i, t))).result(30)
    pool.close()
    assert result.attempts == 2 and len(result.crashes) == 1
    assert [c["index"] for c in script.wires[1]["candidates"]] == [1]   # the retry skips the reported one
    assert [t.evaluation.gate.notes["cluster"]["attempt"] for t in result.traces] == [1, 2]
    assert [i for i, _ in arrived] == [0, 1]                            # streamed as they came
    assert any("retrying once" in n for n in notices)
    assert pool.slots()[0].restarts == 1


def test_second_loss_records_runtime_error_traces(fake):
    script, notices = fake
    pool = _pool(notices)
    job = _job([H.good(), H.wrong()])
    script.crash_at |= {(job.job_id, 1, 1), (job.job_id, 2, 1)}
    result = pool.submit(job).result(30)
    pool.close()
    assert result.attempts == 2
    first, second = result.traces
    assert first.evaluation.gate.reasons == ["FAKE_RUN"]                # kept from attempt 1
    assert second.evaluation.status == EvaluationStatus.RUNTIME_ERROR
    assert second.evaluation.gate.reasons == [J.POOL_WORKER_CRASHED]
    assert "died twice" in second.evaluation.log and "rms_triton_wrong" in second.evaluation.log
    assert second.solution == "rms_triton_wrong"


def test_slots_show_which_device_runs_what(fake):
    script, notices = fake
    pool = _pool(notices, n=2)
    futs = [pool.submit(_job([H.good()], workload=w)) for w in range(3)]
    for f in futs:
        f.result(30)
    slots = pool.slots()
    pool.close()
    busy = [l for snap in script.seen_slots for l in snap if l.state == "busy"]
    assert busy and all(l.job and l.job_id and l.candidate == "rms_triton" and l.attempt == 1 for l in busy)
    assert {l.device for l in slots} == {"cpu#0", "cpu#1"}
    assert sum(l.jobs_done for l in slots) == 3
    assert {l.state for l in pool.slots()} == {"closed"}


def test_trusted_side_error_fails_the_future_with_partial_result(fake):
    script, notices = fake
    pool = _pool(notices)
    job = _job([H.good()])
    script.error_for.add(job.job_id)
    fut = pool.submit(job)
    with pytest.raises(J.JobError, match="reference exploded") as info:
        fut.result(30)
    assert info.value.result.attempts == 1 and info.value.result.traces == []
    pool.close()


def test_a_slot_that_cannot_start_is_retired_and_others_continue(fake):
    script, notices = fake
    script.start_failures = {"cpu#0": 2}
    pool = _pool(notices, n=2)
    results = [pool.submit(_job([H.good()], workload=w)).result(30) for w in range(2)]
    states = {l.device: l.state for l in pool.slots()}
    pool.close()
    assert states["cpu#0"] == "retired" and all(r.devices == ["cpu#1"] for r in results)
    assert any("retired" in n for n in notices)


def test_no_worker_at_all_fails_submissions(fake):
    script, notices = fake
    script.start_failures = {"cpu#0": 2}
    pool = _pool(notices)
    with pytest.raises(RuntimeError, match="no pool worker could be started"):
        pool.submit(_job([H.good()])).result(30)
    pool.close()


def test_affinity_prefers_a_worker_that_already_built_the_solution(fake):
    script, notices = fake
    pool = _pool(notices)
    slot = pool._slots[0]
    a, b = _job([H.good()]), _job([H.wrong()])
    sa, sb = (P._JobState(j, P.Future(), None, None, {"h-" + j.candidates[0].label}) for j in (a, b))
    pool._queue.extend([sa, sb])
    slot.loaded = {"h-rms_triton_wrong"}
    assert pool._pick(slot) is sb                      # warm for b: takes b first
    assert pool._pick(slot) is sa
    pool._queue.extend([sa, sb])
    slot.loaded = set()
    assert pool._pick(slot) is sa                      # cold: first come, first served
    pool._queue.clear()
    pool.close()


def test_cancelled_queued_job_is_never_run(fake):
    script, notices = fake
    script.delay = 0.3
    pool = _pool(notices)
    first = pool.submit(_job([H.good()]))
    second = pool.submit(_job([H.good()], workload=1))
    assert second.cancel()
    first.result(30)
    pool.close()
    assert len(script.wires) == 1 and second.cancelled()


def test_ray_backend_without_ray_falls_back_with_one_notice(fake, monkeypatch):
    from kernelwright.cluster import ray_backend

    script, notices = fake
    monkeypatch.setattr(ray_backend, "ray_available", lambda: False)
    pool = P.EvaluationPool(["cpu", "cpu"], backend="ray", kind="cpu", notice=notices.append)
    assert pool.backend == "local" and pool.size == 2
    pool.close()
    assert len(notices) == 1 and "ray is not installed" in notices[0] and "\n" not in notices[0]


def test_run_bench_distributed_streams_jsonl_and_keeps_sequential_order(fake, tmp_path):
    from kernelwright.cluster.distributed import run_bench_distributed

    script, notices = fake
    plans = [H.plan([H.good(), H.wrong()])]
    progress = []
    lock = threading.Lock()

    def hook(desc, done, total):
        with lock:
            progress.append((desc, done, total))

    run = run_bench_distributed(plans, H.quick_config(), tmp_path, devices=["cpu", "cpu", "cpu"], progress=hook)
    lines = (tmp_path / "traces" / "demo_rmsnorm_h512__quick.jsonl").read_text().splitlines()
    assert len(lines) == 6
    order = [(t.workload.uuid, t.solution) for t in run.traces["demo_rmsnorm_h512__quick"]]
    assert order == [(w.uuid, s) for w in plans[0].workloads for s in ("rms_triton", "rms_triton_wrong")]
    assert progress[-1] == ("done", 6, 6) and [p[1] for p in progress[:-1]] == list(range(1, 7))


def test_results_file_rewritten_during_the_run_is_restored(fake, tmp_path):
    """A solution that rewrites the traces file while other GPUs append to it: the parent
    restores what it received (the per-call file snapshot cannot watch a folder that other
    GPUs legitimately write)."""
    from kernelwright.cluster.distributed import run_bench_distributed

    script, notices = fake
    path = tmp_path / "traces" / "demo_rmsnorm_h512__quick.jsonl"

    def tamper(wire):
        if len(script.wires) == 3 and path.exists():
            path.write_text('{"forged": true}\n')

    script.before_job = tamper
    run = run_bench_distributed([H.plan([H.good()])], H.quick_config(), tmp_path, devices=["cpu"],
                                pool=None, notice=notices.append)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and "forged" not in path.read_text()
    assert [json.loads(l)["workload"]["uuid"] for l in lines] == [w.uuid for w in H.quick_builtin().public_workloads()]
    assert any("restored" in n for n in notices)
    assert json.loads((tmp_path / "candidates.json").read_text())["rms_triton"]["role"] == "solution"
    assert len(run.traces["demo_rmsnorm_h512__quick"]) == 3
