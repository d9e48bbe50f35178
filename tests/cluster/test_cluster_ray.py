"""The Ray backend in local mode with fake GPU resources (``ray.init(num_gpus=2)``): one actor
per "GPU" (num_gpus=1) schedules on CPU.  Skipped only when ray is not importable."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.cluster import cluster_helpers as H

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'kernelwright[ray]'): Ray backend not tested")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_local():
    if not ray.is_initialized():
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_backend_matches_sequential(ray_local, parity_plan, sequential, tmp_path):
    from kernelwright.cluster import run_bench_distributed

    run = run_bench_distributed(parity_plan, H.quick_config(), tmp_path, backend="ray")
    assert H.statuses(run) == H.statuses(sequential)
    lines = (tmp_path / "traces" / "demo_rmsnorm_h512__quick.jsonl").read_text().splitlines()
    assert len(lines) == 9
    devices = {json.loads(l)["evaluation"]["gate"]["notes"]["cluster"]["device"] for l in lines}
    assert all("/gpu" in d for d in devices)        # "<host>/gpu<ray gpu id>"


def test_killed_ray_actor_is_replaced_and_the_job_retried(ray_local, tmp_path):
    from kernelwright.cluster import EvalJob, EvaluationPool
    from kernelwright.gate.bench import Candidate

    b = H.quick_builtin()
    good = H.good()
    with EvaluationPool(1, backend="ray", kind="cpu", notice=lambda m: None) as pool:
        assert pool.backend == "ray"
        job = EvalJob(b, b.public_workloads()[0], [Candidate(good, good.name)], H.quick_config())
        fut = pool.submit(job)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            (slot,) = pool.slots()
            if slot.state == "busy" and slot.candidate and slot.pid:
                break
            time.sleep(0.05)
        assert slot.device.endswith("(cpu)") and "/gpu" in slot.device
        os.kill(slot.pid, signal.SIGKILL)
        result = fut.result(300)
    assert result.attempts == 2 and "died" in result.crashes[0]
    assert result.traces[0].evaluation.status.value == "PASSED", (result.traces[0].evaluation.gate, result.traces[0].evaluation.log)


def test_measure_script_on_ray(ray_local, tmp_path):
    from kernelwright.cluster import measure
    from tests.cluster.test_cluster_measure import write_solution_folder

    folder = write_solution_folder(tmp_path / "sol")
    out = tmp_path / "m"
    code = measure.main(["--device", "cpu", "--quick", "--gpus", "1,4", "--backend", "ray", "--definition", "demo",
                         "--no-shipped", "--solution", str(folder), "--limit", "1", "--trials", "2",
                         "--out", str(out)])
    record = json.loads((out / "measure.json").read_text())
    assert code == 0, record["runs"]
    one, four = record["runs"]
    assert one["backend"] == "ray" and one["status"] == "ok" and one["evaluations"] == 1
    assert four["status"] == "skipped" and "the Ray cluster has 2" in four["reason"]
    assert ray_local.is_initialized()     # the script leaves a Ray it did not start alone
