"""Device-ceiling cache and the hidden split's salt."""

import json
import os
import stat

import pytest
import torch

from kernelwright.gate import device_info, hidden


def test_ceilings_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path))
    assert device_info.load_ceilings(torch.device("cpu")) is None
    measured = {"copy_bandwidth_Bps": 1e11, "bf16_flops": 1e12, "fp8_flops": 1.9e12}
    (tmp_path / "devices.json").write_text(json.dumps({"cpu": {"measured": measured, "source": "test"}}))
    got = device_info.load_ceilings(torch.device("cpu"))
    assert got["measured"] == measured and got["peak"] == measured and got["source"] == "test"
    # a known GPU: the datasheet peak stays the peak even when a measurement is cached
    monkeypatch.setattr(device_info, "device_name", lambda d: "NVIDIA H200")
    assert device_info.load_ceilings(torch.device("cpu")) == device_info.KNOWN_DEVICES["NVIDIA H200"]
    (tmp_path / "devices.json").write_text(json.dumps({"NVIDIA H200": {"measured": measured, "source": "m"}}))
    got = device_info.load_ceilings(torch.device("cpu"))
    assert got["measured"] == measured and got["peak"] == device_info.KNOWN_DEVICES["NVIDIA H200"]["peak"]
    (tmp_path / "devices.json").write_text("{not json")
    assert device_info.load_ceilings(torch.device("cpu")) == device_info.KNOWN_DEVICES["NVIDIA H200"]


def test_legacy_invented_fp8_rate_is_dropped_on_load(tmp_path, monkeypatch):
    """Older caches stored fp8 = 2 x bf16 labelled measured when the FP8 timing failed."""
    from kernelwright.definitions.base import RooflineWork

    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path))
    legacy = {"copy_bandwidth_Bps": 1e11, "bf16_flops": 1e12, "fp8_flops": 2e12}
    (tmp_path / "devices.json").write_text(json.dumps({"cpu": {"measured": legacy, "source": "old"}}))
    got = device_info.load_ceilings(torch.device("cpu"))
    assert "fp8_flops" not in got["measured"] and "fp8_flops" not in got["peak"]
    assert got["measured"]["fp8_flops_unmeasured"] == device_info.LEGACY_FP8_ESTIMATE
    assert got["measured"]["bf16_flops"] == 1e12
    # every consumer copes: the FP8 floor has no FLOP term, the BF16 floor keeps its own
    fp8_work = RooflineWork(flops=1e12, bytes=1e9, unit="fp8")
    assert fp8_work.floor_s(got["measured"]) == pytest.approx(1e9 / 1e11)
    assert RooflineWork(flops=1e12, bytes=1e9, unit="bf16").floor_s(got["measured"]) == pytest.approx(1.0)


def test_device_info_cli_without_an_fp8_rate(monkeypatch):
    from typer.testing import CliRunner

    from kernelwright.cli import app as cli

    info = {"measured": {"copy_bandwidth_Bps": 4e12, "bf16_flops": 7e14, "launch_latency_s": 1e-5,
                         "fp8_flops_unmeasured": "the FP8 matmul could not be timed (RuntimeError: no)"},
            "peak": {"copy_bandwidth_Bps": 4.8e12, "bf16_flops": 9.89e14}, "source": "test", "name": "GPU"}
    monkeypatch.setattr(cli, "require_device", lambda device, hint="": device)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "GPU")
    monkeypatch.setattr(device_info, "load_ceilings", lambda dev: info)
    res = CliRunner().invoke(cli.app, ["device-info", "--device", "cuda"])
    assert res.exit_code == 0, res.output
    assert "FP8 matmul      not measured" in res.output and "could not be timed" in res.output


def test_measure_needs_cuda():
    with pytest.raises(RuntimeError):
        device_info.measure_ceilings(torch.device("cpu"), save=False)


def test_hidden_salt_file_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path))
    monkeypatch.delenv("KERNELWRIGHT_HIDDEN_SALT", raising=False)
    monkeypatch.setattr(hidden, "_from_environment", None)
    salt = hidden.hidden_salt()
    path = tmp_path / "hidden_salt"
    assert len(salt) == 64 and path.read_text().strip() == salt
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert hidden.hidden_salt() == salt                    # stable
    monkeypatch.setenv("KERNELWRIGHT_HIDDEN_SALT", "from-env")
    assert hidden.hidden_salt() == "from-env"


def test_held_out_workloads_exclude_public_shapes():
    from kernelwright import definitions

    for name in ("demo", "indexer", "attention", "moe"):
        b = definitions.get(name)
        public = {tuple(sorted(b.definition.axis_values(w.axes).items())) for w in b.public_workloads()}
        for salt in ("s1", "s2", "s3"):
            held = hidden.held_out_workloads(b, salt)
            keys = [tuple(sorted(b.definition.axis_values(w.axes).items())) for w in held]
            assert not (set(keys) & public) and len(keys) == len(set(keys))
    demo = definitions.get("demo")
    small = hidden.held_out_workloads(demo, "s1", keep=lambda a: a["num_tokens"] <= 64)
    assert all(w.axes["num_tokens"] <= 64 for w in small)
    assert hidden.held_out_workloads(demo, "s1") != hidden.held_out_workloads(demo, "s2")


@pytest.mark.slow
def test_worker_never_sees_the_hidden_salt(tmp_path, monkeypatch):
    """The worker process is started without KERNELWRIGHT_HIDDEN_SALT in its environment."""
    from kernelwright.gate.session import WorkerSession
    from kernelwright.trace import Solution
    from kernelwright.trace.solution import BuildSpec, SourceFile

    monkeypatch.setenv("KERNELWRIGHT_HIDDEN_SALT", "top-secret")
    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path / "cache"))
    src = ("import os\nassert 'KERNELWRIGHT_HIDDEN_SALT' not in os.environ\n"
           "assert b'top-secret' not in open('/proc/self/environ', 'rb').read()\n\ndef run(x, weight, eps, y):\n    y.zero_()\n")
    sol = Solution(name="salt_probe", definition="demo_rmsnorm_h512", author="t",
                   spec=BuildSpec(language="python", target_hardware=["any"], entry_point="kernel.py::run"),
                   sources=[SourceFile(path="kernel.py", content=src)])
    session = WorkerSession(sol, "cpu", log_dir=tmp_path / "logs")
    try:
        reply = session.start()
        assert reply.get("ok"), reply.get("error")
        assert reply.get("tampered") == []
        assert os.environ["KERNELWRIGHT_HIDDEN_SALT"] == "top-secret"
    finally:
        session.close()


def test_run_ceilings_take_the_launch_term_measured_in_the_run(monkeypatch):
    """The launch term of the floor is the device time of one trivial kernel measured in this run;
    a stored value (a cache written by the eager clock, say) never replaces it, and without a
    measurement the floor has no launch term."""
    import torch

    from kernelwright.gate import device_info as D

    table = {"measured": {"copy_bandwidth_Bps": 4e12, "fp8_flops": 1e15, "bf16_flops": 5e14,
                          "launch_latency_s": 14e-6}, "peak": {}, "source": "test"}
    monkeypatch.setattr(D, "load_ceilings", lambda device: {**table, "measured": dict(table["measured"])})
    dev = torch.device("cpu")
    monkeypatch.setattr(D, "launch_latency_now", lambda device: 2.5e-6)
    assert D.ceilings_for_run(dev)["measured"]["launch_latency_s"] == 2.5e-6
    monkeypatch.setattr(D, "launch_latency_now", lambda device: 30e-6)
    assert D.ceilings_for_run(dev)["measured"]["launch_latency_s"] == 30e-6
    monkeypatch.setattr(D, "launch_latency_now", lambda device: None)
    run = D.ceilings_for_run(dev)["measured"]
    assert "launch_latency_s" not in run and "none" in run["launch_latency_source"]
    assert table["measured"]["launch_latency_s"] == 14e-6      # the table itself is not modified


def test_launch_latency_now_is_none_off_cuda():
    import torch

    from kernelwright.gate.device_info import launch_latency_now

    assert launch_latency_now(torch.device("cpu")) is None
