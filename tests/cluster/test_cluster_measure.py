"""The measurement script on CPU pseudo-devices (1 and 2), on a tiny plan: it must run end to
end and write its JSON record and table; the numbers mean nothing on CPU."""

from __future__ import annotations

import json

import pytest

from tests.cluster import cluster_helpers as H

pytestmark = pytest.mark.slow


def write_solution_folder(folder):
    sol = H.good()
    folder.mkdir(parents=True)
    (folder / "kernel.py").write_text(sol.sources[0].content)
    (folder / "manifest.json").write_text(json.dumps({
        "name": sol.name, "definition": sol.definition, "author": "tests", "language": "triton",
        "entry_point": "kernel.py::run", "destination_passing_style": True}))
    return folder


def test_measure_script_with_one_and_two_pseudo_devices(tmp_path, capsys):
    from kernelwright.cluster import measure

    folder = write_solution_folder(tmp_path / "sol")
    out = tmp_path / "measure"
    code = measure.main(["--device", "cpu", "--quick", "--gpus", "1,2", "--backend", "local",
                         "--definition", "demo", "--no-shipped", "--solution", str(folder), "--limit", "2",
                         "--trials", "2", "--out", str(out)])
    assert code == 0
    record = json.loads((out / "measure.json").read_text())
    runs = {r["gpus"]: r for r in record["runs"]}
    assert set(runs) == {1, 2} and all(r["status"] == "ok" for r in runs.values())
    for n, r in runs.items():
        assert r["evaluations"] == 2 and r["workload_trials"] == 4
        assert r["trials_per_min_wall"] > 0 and r["statuses"] == {"PASSED": 2}
        assert set(r["per_device"]) <= {f"cpu#{i}" for i in range(n)}
    assert runs[1]["speedup"] == 1.0
    assert record["status_mismatches"] == []
    assert record["plan"]["evaluations_per_run"] == 2
    ag = record["agreement"]
    assert len(ag["rows"]) == 2 and all(r["measurements"] == 2 for r in ag["rows"])
    table = (out / "measure.md").read_text()
    assert "| local | 1 | ok |" in table and "| local | 2 | ok |" in table
    assert (out / "local-2gpu" / "traces" / "demo_rmsnorm_h512__quick.jsonl").is_file()


def test_measure_script_records_what_cannot_run_here(tmp_path, monkeypatch):
    """On a machine without enough GPUs / without Ray every configuration is recorded as skipped."""
    from kernelwright.cluster import measure, ray_backend

    monkeypatch.setattr(ray_backend, "ray_available", lambda: False)
    folder = write_solution_folder(tmp_path / "sol")
    out = tmp_path / "m"
    code = measure.main(["--gpus", "2,4", "--backend", "local,ray", "--definition", "demo", "--no-shipped",
                         "--solution", str(folder), "--out", str(out)])
    record = json.loads((out / "measure.json").read_text())
    assert code == 1     # nothing ran
    assert [(r["backend"], r["gpus"], r["status"]) for r in record["runs"]] == [
        ("local", 2, "skipped"), ("local", 4, "skipped"), ("ray", 2, "skipped"), ("ray", 4, "skipped")]
    assert "ray is not installed" in record["runs"][-1]["reason"]
