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


def _probe(level, tmp_path, results=None, hide=None):
    """Start tests.gate.boundary_probe.attack behind ``level``; returns its results.  ``results``:
    a results folder the probe tries to read; ``hide``: what the boundary hides (default the
    salt's folder)."""
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
    launch = sandbox.plan_launch(level, "cpu", log_fd if level != "none" else None,
                                 hide=[secret.parent] if hide is None else hide)
    ctx = tmp.get_context("spawn")
    a, b = ctx.Pipe()
    targets = {"parent_pid": os.getpid(), "root_pid": sleeper.pid, "secret": str(secret),
               "writes": {"repository": os.path.dirname(os.path.abspath(__file__)),
                          "site-packages": guards.site_dirs()[0], "outside scratch": outside},
               "results": str(results) if results else None, "expect": launch.expect}
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


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="the control needs root (what the boundary takes away)")
def test_without_the_boundary_the_results_folder_is_readable(tmp_path, results_folder):
    """The control of the results-folder tests below: without a boundary the worker reads it."""
    results, _ = _probe("none", tmp_path, results=results_folder,
                        hide=guards.boundary_hidden_dirs(results_folder, results_folder / "logs"))
    assert results["read the results folder"] == "ok", results


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


BOUNDARY = pytest.mark.skipif(not ROOT or sandbox.why_unavailable("full") is not None,
                              reason="needs root, unshare, setpriv")


@pytest.fixture
def results_folder(monkeypatch, tmp_path):
    """A results folder as ``kernelwright bench`` leaves one by default: under ``kw-results/`` in
    the checkout (outside /tmp, whose private tmpfs hides every temp folder anyway), mode 0755,
    with a summary.json anyone may read; the cache at ``tmp_path/cache``."""
    import secrets
    import shutil
    from pathlib import Path

    monkeypatch.setenv("KERNELWRIGHT_CACHE", str(tmp_path / "cache"))
    folder = Path(__file__).resolve().parents[2] / "kw-results" / f"test-boundary-{secrets.token_hex(4)}"
    (folder / "logs").mkdir(parents=True)
    os.chmod(folder, 0o755)
    (folder / "summary.json").write_text('{"meta": {"config": {"nonce": "0123"}}}')
    os.chmod(folder / "summary.json", 0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@BOUNDARY
@pytest.mark.parametrize("level", ["full", "mount"])
def test_the_results_folder_is_hidden_like_the_cache(level, tmp_path, results_folder):
    """The session's hidden directories (``guards.boundary_hidden_dirs``: cache, results folder,
    logs) behind ``level``: the results folder cannot be read and the self-test's "hidden" checks
    pass; without it in the list the same folder is readable (so this test can fail)."""
    hidden = guards.boundary_hidden_dirs(results_folder, results_folder / "logs")
    assert hidden == [str(tmp_path / "cache"), str(results_folder), str(results_folder / "logs")]
    results, _ = _probe(level, tmp_path, results=results_folder, hide=hidden)
    assert results["read the results folder"] != "ok" and results["read the salt"] != "ok", results
    assert results["self_test_failed"] == [], results["self_test_failed"]
    control, _ = _probe(level, tmp_path, results=results_folder, hide=[tmp_path / "cache"])
    assert control["read the results folder"] == "ok", control


@pytest.mark.slow
@BOUNDARY
def test_a_hidden_folder_inside_a_readable_path_bound_back_stays_hidden(tmp_path, monkeypatch):
    """A hidden folder in a directory the view replaces (here /tmp; /root for a checkout there) but
    inside a readable path bound back into it (the checkout, with its kw-results/) is visible
    through that path: it is covered too."""
    repo = tmp_path / "repo"
    inner = repo / "kw-results" / "run"
    inner.mkdir(parents=True)
    for d in (repo, repo / "kw-results", inner):
        os.chmod(d, 0o755)
    (inner / "summary.json").write_text("{}")
    os.chmod(inner / "summary.json", 0o644)
    monkeypatch.setenv(sandbox.READABLE_ENV, str(repo))
    results, _ = _probe("full", tmp_path, results=inner, hide=[inner])
    assert results["read the results folder"] != "ok" and results["self_test_failed"] == [], results
    control, _ = _probe("full", tmp_path, results=inner, hide=[])
    assert control["read the results folder"] == "ok", control


def test_a_session_hides_the_results_folder_above_its_logs(tmp_path):
    """``WorkerSession``'s results folder (hidden behind the boundary) is the folder above its logs,
    the one its default ``protect`` watches, unless given."""
    from kernelwright.gate.session import WorkerSession
    from kernelwright.redteam import get_case

    sol = get_case("honest_triton").solution()
    session = WorkerSession(sol, "cpu", log_dir=tmp_path / "run" / "logs")
    assert session.results_dir == tmp_path / "run" and str(tmp_path / "run") in session.protect
    assert WorkerSession(sol, "cpu", log_dir=tmp_path / "logs", protect=[],
                         results_dir=tmp_path / "elsewhere").results_dir == tmp_path / "elsewhere"
