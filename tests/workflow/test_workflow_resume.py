"""Kill the orchestrator (a subprocess, SIGKILL) mid-run and resume it: no finished attempt is
lost or repeated.  Slow: real gate evaluations on CPU."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _rows(db: Path, sql: str):
    conn = sqlite3.connect(str(db), timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def _descendants(root: int) -> set:
    """(pid, start time) of every process under ``root`` now, by /proc's parent links (the gate's
    workers start their own sessions, so the killed orchestrator's process group does not hold
    them)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = (int(fields[1]), fields[19])   # ppid, start time
    found, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        for child, (ppid, start) in parents.items():
            if ppid == pid and (child, start) not in found:
                found.add((child, start))
                frontier.append(child)
    return found


def _wait_gone(processes: set, timeout: float) -> None:
    """Until none of these (pid, start time) processes is alive, at most ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = set()
        for pid, start in processes:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[19] == start:
                        alive.add((pid, start))
            except OSError:
                pass
        if not alive:
            return
        processes = alive
        time.sleep(0.2)


def test_kill_and_resume(tmp_path):
    run = tmp_path / "run"
    journal = tmp_path / "journal.jsonl"
    env = {**os.environ, "KW_DEMO_JOURNAL": str(journal)}
    argv = [sys.executable, "-m", "kernelwright", "optimize", "--demo", "--run-dir", str(run), "--max-cycles", "2"]
    log1 = open(tmp_path / "first.log", "w")
    proc = subprocess.Popen(argv, env=env, stdout=log1, stderr=subprocess.STDOUT, start_new_session=True)
    db = run / "state.sqlite"
    deadline = time.time() + 900
    killed_at = None
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if not db.exists():
                continue
            try:
                finished = _rows(db, "SELECT id FROM attempts WHERE status IN ('passed','failed')")
                busy = _rows(db, "SELECT id FROM candidates WHERE status='evaluating' AND origin!='start'") + \
                    _rows(db, "SELECT id FROM attempts WHERE status IN ('checking','coding')")
            except sqlite3.Error:
                continue
            if len(finished) >= 2 and busy:
                children = _descendants(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                killed_at = time.time()
                break
    finally:
        if proc.poll() is None and killed_at is None:
            proc.kill()
        proc.wait()
        log1.close()
    assert killed_at is not None, (tmp_path / "first.log").read_text()[-3000:]
    run_row = _rows(db, "SELECT status FROM runs")[0]
    assert run_row["status"] == "running"          # killed, not finished
    before = {r["id"]: r for r in _rows(db, "SELECT * FROM attempts WHERE status IN ('passed','failed')")}
    decided = {r["id"]: r for r in _rows(db, "SELECT id, status, decided_at, final_json FROM candidates "
                                             "WHERE decided_at IS NOT NULL")}
    turns_before = _rows(db, "SELECT id, role, agent, attempt_id FROM turns")
    # the killed orchestrator's evaluation children notice and exit; the resumed run's timings
    # must not share the CPU with them (a final measured beside them missed its x1.02 promotion)
    _wait_gone(children, timeout=120)

    log2 = open(tmp_path / "second.log", "w")
    rc = subprocess.run([sys.executable, "-m", "kernelwright", "optimize", "--resume", str(run)], env=env,
                        stdout=log2, stderr=subprocess.STDOUT, timeout=1500).returncode
    log2.close()
    second_log = (tmp_path / "second.log").read_text()
    assert rc == 0, second_log[-3000:]
    assert "resume" in second_log

    # finished attempts are untouched
    after = {r["id"]: r for r in _rows(db, "SELECT * FROM attempts")}
    for aid, row in before.items():
        assert after[aid] == row, f"attempt {aid} changed after resume"
    for cid, row in decided.items():
        now = _rows(db, f"SELECT id, status, decided_at, final_json FROM candidates WHERE id={cid}")[0]
        assert now == row, f"candidate c{cid} was re-decided"
    # nothing repeated: one coder turn per attempt, exactly the attempts the plans asked for
    assert len(after) == 4 and sorted(after) == [1, 2, 3, 4]
    coder_turns = _rows(db, "SELECT attempt_id, COUNT(*) n FROM turns WHERE role='coder' GROUP BY attempt_id")
    for t in coder_turns:
        if t["attempt_id"] in before:
            assert t["n"] == 1
    calls = [json.loads(l) for l in journal.read_text().splitlines()]
    for aid in before:
        assert sum(1 for c in calls if c.get("role") == "coder" and c.get("attempt") == aid) == 1
    assert [r["idx"] for r in _rows(db, "SELECT idx FROM cycles ORDER BY idx")] == [1, 2]
    # the earlier turns are still there, unchanged
    ids_after = {r["id"] for r in _rows(db, "SELECT id FROM turns")}
    assert {t["id"] for t in turns_before} <= ids_after
    # and the run still reached its goal (unless another process edited the gate's sources meanwhile):
    # cycle 1's candidate promoted; every later candidate decided, and each one that reached a final
    # passed both splits with a measured ratio to the best.  Whether that ratio clears x1.02 is the
    # demo's timing on a busy 2-core host (test_workflow_e2e asserts the promotion); resume is not.
    from workflow_helpers import skip_if_sources_tampered

    skip_if_sources_tampered(run)
    cands = _rows(db, "SELECT id, cycle_id, status, reason, improvement, final_json, decided_at FROM candidates "
                      "WHERE origin!='start' ORDER BY id")
    assert cands and cands[0]["cycle_id"] == 1 and cands[0]["status"] == "promoted", cands
    for cand in cands:
        assert cand["status"] in ("promoted", "not_better", "skipped") and cand["decided_at"], cand
        if cand["final_json"]:
            final = json.loads(cand["final_json"])
            assert final["public"]["all_passed"] and final["final_passed"], cand["reason"]
            assert cand["improvement"] and cand["improvement"] > 0, cand
    assert {c["cycle_id"] for c in cands} == {1, 2}
    assert _rows(db, "SELECT status, sessions FROM runs")[0] == {"status": "finished", "sessions": 2}
