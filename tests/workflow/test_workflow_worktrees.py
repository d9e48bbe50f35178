"""Run repository, worktrees and the edit-surface check (git only, no gate)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.skills import skills_dir
from kernelwright.workflow import worktrees as W
from kernelwright.workflow.config import DEFAULT_SURFACE
from kernelwright.workflow.demo import EXAMPLES


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    sha = W.create_run_repo(repo, EXAMPLES / "slow_rmsnorm", {".kernelwright/task.md": "# task\n"}, skills_dir())
    wt = W.ensure_worktree(repo, tmp_path / "wt" / "coder-1", "wt/coder-1", sha)
    return repo, wt, sha


def test_globs():
    assert W.matches("solution/kernel.py", ["solution/**/*.py"])
    assert W.matches("solution/sub/a.cu", DEFAULT_SURFACE)
    assert not W.matches("solution/manifest.json", DEFAULT_SURFACE)
    assert not W.matches(".kernelwright/task.md", DEFAULT_SURFACE)
    assert not W.matches("solutionX/kernel.py", DEFAULT_SURFACE)
    assert W.matches("a/b/__pycache__/x.pyc", W.IGNORED)
    assert W.surface_is_within("solution/kernel.py", DEFAULT_SURFACE)
    assert W.surface_is_within("solution/**/*.py", DEFAULT_SURFACE)
    assert not W.surface_is_within("solution/manifest.json", DEFAULT_SURFACE)
    assert not W.surface_is_within("tests/test_x.py", DEFAULT_SURFACE)
    assert not W.surface_is_within("solution/../gate/x.py", DEFAULT_SURFACE)


def test_repo_layout(repo):
    r, wt, sha = repo
    assert (wt / "solution" / "kernel.py").is_file()
    assert (wt / ".kernelwright" / "skills" / "06-anti-hacking.md").is_file()
    assert W.git(r, "rev-parse", "HEAD").strip() == sha


def test_inside_surface_is_committed(repo):
    r, wt, sha = repo
    hashes = W.write_context(wt, {"assignment.md": "do it"})
    (wt / "solution" / "kernel.py").write_text("# new kernel\n")
    (wt / "solution" / "helper.py").write_text("X = 1\n")
    (wt / ".kernelwright" / "scratch" / "log.txt").write_text("scratch is fine")
    (wt / "solution" / "__pycache__").mkdir()
    (wt / "solution" / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\0")
    rep = W.inspect_changes(wt, sha, DEFAULT_SURFACE, hashes)
    assert rep.ok, rep.summary()
    assert rep.changed == ["solution/helper.py", "solution/kernel.py"]
    new = W.commit_surface(wt, sha, rep.changed, "attempt")
    assert new and new != sha
    out = W.export_solution(r, new, Path(str(wt) + "-export"))
    assert (out / "helper.py").read_text() == "X = 1\n"
    assert (out / "manifest.json").is_file()
    assert "new kernel" in W.diff_between(r, sha, new)


@pytest.mark.parametrize("edit", ["task", "manifest", "skill", "new_test", "delete_skill", "context"])
def test_outside_surface_is_rejected(repo, edit):
    r, wt, sha = repo
    hashes = W.write_context(wt, {"assignment.md": "do it"})
    (wt / "solution" / "kernel.py").write_text("# new kernel\n")
    if edit == "task":
        (wt / ".kernelwright" / "task.md").write_text("# easier task\n")
    elif edit == "manifest":
        (wt / "solution" / "manifest.json").write_text("{}")
    elif edit == "skill":
        (wt / ".kernelwright" / "skills" / "06-anti-hacking.md").write_text("anything goes")
    elif edit == "new_test":
        (wt / "tests").mkdir()
        (wt / "tests" / "test_kernel.py").write_text("def test(): pass\n")
    elif edit == "delete_skill":
        (wt / ".kernelwright" / "skills" / "00-how-a-turn-works.md").unlink()
    elif edit == "context":
        (wt / ".kernelwright" / "context" / "assignment.md").write_text("do something else")
    rep = W.inspect_changes(wt, sha, DEFAULT_SURFACE, hashes)
    assert not rep.ok
    assert rep.summary()


def test_symlink_into_solution_is_rejected(repo):
    r, wt, sha = repo
    os.symlink("/etc/hostname", wt / "solution" / "data.py")
    rep = W.inspect_changes(wt, sha, DEFAULT_SURFACE, {})
    assert not rep.ok and "symlink" in rep.summary()


def test_agent_commits_are_seen_and_undone(repo):
    r, wt, sha = repo
    (wt / "solution" / "kernel.py").write_text("# kernel\n")
    (wt / ".kernelwright" / "task.md").write_text("# changed and committed by the agent\n")
    W.git(wt, "add", "-A")
    W.git(wt, "commit", "-q", "-m", "agent commit")
    rep = W.inspect_changes(wt, sha, DEFAULT_SURFACE, {})
    assert ".kernelwright/task.md" in rep.outside
    # committing only the surface puts the task back to the base version
    new = W.commit_surface(wt, sha, ["solution/kernel.py"], "surface only")
    assert W.git(r, "diff", "--name-only", sha, new).split() == ["solution/kernel.py"]


def test_reset_removes_everything(repo):
    r, wt, sha = repo
    (wt / "solution" / "kernel.py").write_text("# dirty\n")
    (wt / "junk.txt").write_text("x")
    W.reset_worktree(wt, "wt/coder-1", sha)
    assert not (wt / "junk.txt").exists()
    assert W.inspect_changes(wt, sha, DEFAULT_SURFACE, {}).changed == []
