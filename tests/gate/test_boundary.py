"""The OS boundary around a worker (gate/sandbox.py, docs/gate.md section 1 "The boundary").

As root, a child started behind each level tries what a solution would: open the parent's
memory and environment, trace a root process, signal the parent, write the repository,
site-packages and a world-writable directory outside its scratch, read the salt file.  Each
attempt must fail behind the boundary; the same child without a boundary (``none``) succeeds at
them, so the test fails where the boundary is missing.
"""

import os
import stat
import subprocess
import sys
import tempfile

import pytest

from kernelwright.gate import guards, hidden, sandbox

ROOT = os.geteuid() == 0


def test_requested_levels(monkeypatch):
    monkeypatch.delenv(sandbox.ENV, raising=False)
    assert sandbox.requested_level("cpu") == "full"
    assert sandbox.requested_level("cuda:0") == "mount"      # legacy CUDA IPC does not cross PID namespaces
    monkeypatch.setenv(sandbox.ENV, "uid")
    assert sandbox.requested_level("cpu") == "uid"
    assert sandbox.levels_from("mount") == ["mount", "uid", "none"]
    with pytest.raises(ValueError):
        sandbox.requested_level("cpu", "bubblewrap")


def test_effective_level_comes_from_the_parents_observation():
    b = sandbox.Boundary("full", "full", observed={"uid": 7, "capabilities": 0, "no_new_privs": True,
                                                   "pid_namespace": True, "mount_namespace": True})
    assert b.effective_level() == "full"
    b.observed["pid_namespace"] = False
    assert b.effective_level() == "mount"
    b.observed["capabilities"] = 1
    assert b.effective_level() == "none"
    b.observed["capabilities"] = 0
    b.self_test = {"failed": ["read-only /x: a file could be created"]}
    assert b.effective_level() == "none" and b.as_note()["self_test_failed"]


def _probe(level, tmp_path, parent_env_secret="probe-secret-value"):
    """Start tests.gate.boundary_probe.attack behind ``level``; returns its results."""
    import torch.multiprocessing as tmp

    from tests.gate import boundary_probe

    outside = tempfile.mkdtemp(prefix="kw-outside-", dir="/tmp")
    os.chmod(outside, 0o777)                     # world-writable, outside the scratch directory
    secret = tmp_path / "cache" / "hidden_salt"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("salt")
    os.chmod(secret, 0o644)                      # readable by anyone: only the boundary hides it
    os.chmod(secret.parent, 0o755)
    sleeper = subprocess.Popen(["sleep", "60"])
    log_fd = os.open(tmp_path / f"{level}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    launch = sandbox.plan_launch(level, "cpu", log_fd if level != "none" else None, hide=[secret.parent])
    ctx = tmp.get_context("spawn")
    a, b = ctx.Pipe()
    targets = {"parent_pid": os.getpid(), "root_pid": sleeper.pid, "secret": str(secret),
               "writes": {"repository": os.path.dirname(os.path.abspath(__file__)),
                          "site-packages": guards.site_dirs()[0], "outside scratch": outside}}
    proc = ctx.Process(target=boundary_probe.attack, args=(b, targets), daemon=True)
    sandbox.protect_parent()
    try:
        with sandbox.launch_through(launch.prefix, launch.pass_fds):
            proc.start()
        b.close()
        assert a.poll(120), open(tmp_path / f"{level}.log").read() if level != "none" else "no reply"
        results = a.recv()
        a.send("done")
        proc.join(20)
        return results, launch
    finally:
        os.close(log_fd)
        sleeper.kill()
        if proc.is_alive():
            proc.kill()
        if launch.scratch:
            import shutil

            shutil.rmtree(launch.scratch, ignore_errors=True)
        os.rmdir(outside)


ATTACKS = ("parent mem", "parent environ", "ptrace a root process", "signal the parent", "write repository",
           "write site-packages", "read the salt")


@pytest.mark.slow
@pytest.mark.skipif(not ROOT or sandbox.why_unavailable("full") is not None, reason="needs root, unshare, setpriv")
@pytest.mark.parametrize("level", ["full", "mount"])
def test_the_boundary_refuses_every_attempt(level, tmp_path):
    results, launch = _probe(level, tmp_path)
    holes = {k: v for k, v in results.items() if k in ATTACKS + ("write outside scratch",) and v == "ok"}
    assert not holes, f"{level}: these attempts succeeded behind the boundary: {holes}"
    assert results["write scratch"] == "ok" and results["uid"] == launch.uid


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="the control needs root (what the boundary takes away)")
def test_without_the_boundary_the_same_attempts_succeed(tmp_path):
    """The control: the probe's attempts are real (a root worker without a boundary reads the
    parent's memory, traces, writes the repository), so the test above can fail."""
    results, _ = _probe("none", tmp_path)
    assert all(results[k] == "ok" for k in ATTACKS + ("write outside scratch",)), results


def test_salt_leaves_the_exec_environment(tmp_path):
    """KERNELWRIGHT_HIDDEN_SALT is out of os.environ and out of /proc/self/environ as soon as
    kernelwright is imported, and the salt is still the one the environment gave."""
    code = ("import os, kernelwright\nfrom kernelwright.gate import hidden\n"
            "assert 'KERNELWRIGHT_HIDDEN_SALT' not in os.environ\n"
            "assert b'salt-value-4242' not in open('/proc/self/environ', 'rb').read()\n"
            "assert hidden.hidden_salt() == 'salt-value-4242'\nprint('ok')\n")
    env = {**os.environ, "KERNELWRIGHT_HIDDEN_SALT": "salt-value-4242", "KERNELWRIGHT_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_salt_file_is_kept_private(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path))
    monkeypatch.delenv("KERNELWRIGHT_HIDDEN_SALT", raising=False)
    monkeypatch.setattr(hidden, "_from_environment", None)
    hidden.hidden_salt()
    os.chmod(tmp_path / "hidden_salt", 0o644)
    hidden.hidden_salt()
    assert stat.S_IMODE(os.stat(tmp_path / "hidden_salt").st_mode) == 0o600
