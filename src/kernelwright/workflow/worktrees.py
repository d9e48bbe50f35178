"""The run repository, one git worktree per agent, and the edit-surface check.

Layout of a run repository (``RUN/repo``, created by :func:`create_run_repo`)::

    solution/                   the starting solution folder (manifest.json + sources)
    .kernelwright/task.md       the definition, its reference, the workloads and the commands
    .kernelwright/skills/*.md   the skills every agent is handed
    .kernelwright/context/      (untracked) what the orchestrator writes before each turn
    .kernelwright/scratch/      (untracked) the agent's scratch area; never committed

Each agent works in its own worktree (``RUN/worktrees/<agent>``) whose working directory the
orchestrator sets for the agent's process.  After a turn the orchestrator lists every changed,
deleted or new file against the attempt's base commit (:func:`inspect_changes`) and rejects
the attempt when anything outside the allowed edit surface changed: the task and skills are
tracked files, so editing them is caught like any other file; symlinks are refused (they could
pull files from outside into the solution).  Only the surface files are committed, on top of
the base commit, whatever the agent did to the branch (:func:`commit_surface`).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional

SOLUTION_DIR = "solution"
KW_DIR = ".kernelwright"
CONTEXT_DIR = ".kernelwright/context"
SCRATCH_DIR = ".kernelwright/scratch"
#: created by running things; never committed, never a violation
IGNORED = [SCRATCH_DIR + "/**", "kw-results/**", "**/__pycache__/**", "**/*.pyc", ".pytest_cache/**",
           "**/.ipynb_checkpoints/**"]
MAX_FILE_BYTES = 1 << 20

_GIT_ID = ["-c", "user.name=kernelwright", "-c", "user.email=kernelwright@localhost", "-c", "commit.gpgsign=false",
           "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false", "-c", "init.defaultBranch=main"]


class GitError(RuntimeError):
    """A git command failed (message: the command and git's last stderr line)."""


def git(cwd: Path, *args: str, input: Optional[bytes] = None, binary: bool = False):
    """Run git in ``cwd``; returns stdout (str, or bytes with ``binary``).  Raises GitError."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    proc = subprocess.run(["git", *_GIT_ID, *args], cwd=str(cwd), input=input, capture_output=True, env=env)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {' '.join(args[:3])}: {err[-1] if err else 'exit ' + str(proc.returncode)}")
    return proc.stdout if binary else proc.stdout.decode(errors="replace")


# -- globs ---------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> "re.Pattern[str]":
    """``**/`` = any number of directories, ``**`` = anything, ``*`` and ``?`` stay in one segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the relative POSIX ``path`` matches one of the glob ``patterns``."""
    return any(_glob_regex(p).match(path) for p in patterns)


def surface_is_within(pattern: str, run_surface: List[str]) -> bool:
    """Whether a planner-proposed surface glob stays inside the solution folder of the run's
    surface (it must name a path under ``solution/`` and never the manifest)."""
    p = pattern.strip().lstrip("./")
    if not p.startswith(SOLUTION_DIR + "/") or ".." in p.split("/") or p.endswith("manifest.json"):
        return False
    probe = re.sub(r"\*\*/?|\*|\?", "x", p)
    return matches(probe, run_surface) or p.endswith("/**") or p.endswith("*")


# -- the run repository --------------------------------------------------------------------
def create_run_repo(repo: Path, solution_dir: Path, files: Dict[str, str], skills_dir: Path) -> str:
    """Create the run repository: the starting solution under ``solution/``, ``files``
    (relative path -> text, e.g. the task) and the skills; commit; returns the commit sha.
    Raises GitError, FileNotFoundError."""
    repo = Path(repo)
    if (repo / ".git").exists():
        return git(repo, "rev-parse", "HEAD").strip()
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    dest = repo / SOLUTION_DIR
    shutil.copytree(solution_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    skills_dest = repo / KW_DIR / "skills"
    skills_dest.mkdir(parents=True, exist_ok=True)
    for md in sorted(Path(skills_dir).glob("*.md")):
        shutil.copy2(md, skills_dest / md.name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "starting solution, task and skills")
    return git(repo, "rev-parse", "HEAD").strip()


def ensure_worktree(repo: Path, path: Path, branch: str, base: str) -> Path:
    """Create ``path`` as a worktree of ``repo`` on ``branch`` at ``base`` (if absent)."""
    path = Path(path)
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            shutil.rmtree(path)
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "-q", "-f", "-B", branch, str(path), base)
    return path


def reset_worktree(path: Path, branch: str, base: str) -> None:
    """Put the worktree exactly at ``base`` on ``branch``: checkout -f, then remove every
    untracked and ignored file."""
    git(path, "checkout", "-q", "-f", "-B", branch, base)
    git(path, "reset", "-q", "--hard", base)
    git(path, "clean", "-q", "-ffdx")


def write_context(path: Path, files: Dict[str, str]) -> Dict[str, str]:
    """Write the orchestrator's context files under ``.kernelwright/context/``; returns
    {relative path: sha256} to verify after the turn."""
    hashes = {}
    for rel, text in files.items():
        target = Path(path) / CONTEXT_DIR / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        hashes[f"{CONTEXT_DIR}/{rel}"] = hashlib.sha256(text.encode()).hexdigest()
    (Path(path) / SCRATCH_DIR).mkdir(parents=True, exist_ok=True)
    return hashes


@dataclass
class ChangeReport:
    """What a turn changed in a worktree, relative to the attempt's base commit."""

    changed: List[str] = field(default_factory=list)      # inside the surface (to be committed)
    outside: List[str] = field(default_factory=list)      # outside the surface: reject
    problems: List[str] = field(default_factory=list)     # symlinks, huge files, context edits
    ignored: List[str] = field(default_factory=list)      # scratch, caches

    @property
    def ok(self) -> bool:
        return not self.outside and not self.problems

    def summary(self) -> str:
        if self.ok:
            return f"{len(self.changed)} file(s) changed inside the surface"
        parts = []
        if self.outside:
            parts.append("outside the allowed surface: " + ", ".join(self.outside[:8]))
        parts += self.problems[:8]
        return "; ".join(parts)


def inspect_changes(path: Path, base: str, surface: List[str], context_hashes: Dict[str, str],
                    max_file_bytes: int = MAX_FILE_BYTES) -> ChangeReport:
    """Every file changed, deleted or created in the worktree since ``base`` (commits the agent
    made included), sorted into inside / outside the surface.  Raises GitError."""
    path = Path(path)
    tracked = git(path, "diff", "--name-only", "--no-renames", "-z", base).split("\0")
    untracked = git(path, "ls-files", "--others", "-z").split("\0")
    report = ChangeReport()
    for rel in sorted({p for p in tracked + untracked if p}):
        if rel.startswith(CONTEXT_DIR + "/"):
            continue  # checked below by hash
        if matches(rel, IGNORED):
            report.ignored.append(rel)
            continue
        full = path / rel
        if not matches(rel, surface):
            report.outside.append(rel)
        elif full.is_symlink():
            report.problems.append(f"{rel} is a symlink (not allowed)")
        elif full.exists() and full.is_file() and full.stat().st_size > max_file_bytes:
            report.problems.append(f"{rel} is larger than {max_file_bytes} bytes")
        else:
            report.changed.append(rel)
    for rel, digest in context_hashes.items():
        full = path / rel
        now = hashlib.sha256(full.read_bytes()).hexdigest() if full.is_file() and not full.is_symlink() else None
        if now != digest:
            report.problems.append(f"{rel} (orchestrator context) was modified")
    return report


def commit_surface(path: Path, base: str, files: List[str], message: str) -> Optional[str]:
    """Commit exactly ``files`` (their current contents, deletions included) on top of ``base``;
    returns the new commit sha, or None when they equal ``base``.  Raises GitError."""
    git(path, "reset", "-q", "--mixed", base)   # undo any commits the agent made, keep files
    if files:
        git(path, "add", "-A", "--", *files)
    if not git(path, "diff", "--cached", "--name-only").strip():
        return None
    git(path, "commit", "-q", "--no-verify", "-m", message)
    return git(path, "rev-parse", "HEAD").strip()


def export_solution(repo: Path, sha: str, dest: Path) -> Path:
    """Write the ``solution/`` folder of commit ``sha`` to ``dest`` (replaced); returns it."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    data = git(repo, "archive", "--format=tar", sha, SOLUTION_DIR, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                continue  # no links or devices out of an archive
            rel = Path(member.name).relative_to(SOLUTION_DIR) if member.name != SOLUTION_DIR else Path(".")
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    return dest


def diff_between(repo: Path, base: str, sha: str) -> str:
    """Unified diff of the solution folder between two commits."""
    return git(repo, "diff", base, sha, "--", SOLUTION_DIR)


def set_branch(repo: Path, name: str, sha: str) -> None:
    """Point branch ``name`` of the run repository at ``sha`` (e.g. ``best``)."""
    git(repo, "branch", "-f", name, sha)
