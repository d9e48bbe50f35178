"""Run state in one SQLite file per run folder (``RUN/state.sqlite``, stdlib ``sqlite3``).

Every state transition of the orchestrator is one transaction (:meth:`State.tx`, ``BEGIN
IMMEDIATE``), so a run killed at any instant resumes from a consistent state: a step that was
claimed but not finished is found in a ``running``-like status and put back in the queue
(:meth:`State.recover`); a step that finished was committed together with its results and is
never repeated.  The operator console writes to the same file from another process (WAL mode,
busy timeout), which is how ``kernelwright run pause|redirect|...`` reach a live run.

Times are UNIX seconds (``REAL``) unless a column name says otherwise; ``active_s`` is the
orchestrator's accumulated running time (seconds) across sessions, the clock of the run's
speedup-over-time curve.  Token counts are tokens; costs are US dollars.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

SCHEMA_VERSION = 1
DB_NAME = "state.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- one row: the run (a run folder holds exactly one run)
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  definition TEXT NOT NULL,
  created_at REAL NOT NULL,
  status TEXT NOT NULL,          -- created|running|waiting_operator|paused|stopped|finished|interrupted|failed
  control TEXT NOT NULL,         -- operator intent: active|paused|stopped
  stop_reason TEXT,
  config_json TEXT NOT NULL,
  best_candidate INTEGER,        -- candidates.id of the current best (NULL: nothing passed yet)
  active_s REAL NOT NULL DEFAULT 0,
  heartbeat_at REAL,
  pid INTEGER,
  sessions INTEGER NOT NULL DEFAULT 0
);

-- search directions: what the Planner proposes (or the operator redirects to)
CREATE TABLE IF NOT EXISTS directions (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  origin TEXT NOT NULL,          -- planner|operator
  description TEXT NOT NULL DEFAULT '',
  reference TEXT,                -- operator-supplied reference (URL, paper, file)
  status TEXT NOT NULL,          -- open|research_requested|researching|escalated|closed
  failed_attempts INTEGER NOT NULL DEFAULT 0,       -- consecutive failures before research
  research_failed_attempts INTEGER NOT NULL DEFAULT 0,
  research_requested INTEGER NOT NULL DEFAULT 0,
  research_brief TEXT,
  operator_escalated INTEGER NOT NULL DEFAULT 0,
  successes INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL
);

-- one planning round: planner turn -> assignments -> attempts -> synthesis -> gate
CREATE TABLE IF NOT EXISTS cycles (
  id INTEGER PRIMARY KEY,
  idx INTEGER NOT NULL UNIQUE,
  status TEXT NOT NULL,          -- planning|coding|synthesis|final|done|failed
  base_candidate INTEGER,        -- the best when the cycle was planned (what coders start from)
  plan_json TEXT,
  synthesis_json TEXT,
  error TEXT,
  created_at REAL NOT NULL,
  finished_at REAL
);

CREATE TABLE IF NOT EXISTS assignments (
  id INTEGER PRIMARY KEY,
  cycle_id INTEGER NOT NULL REFERENCES cycles(id),
  direction_id INTEGER NOT NULL REFERENCES directions(id),
  hypothesis TEXT NOT NULL,
  target_regime TEXT NOT NULL,
  edit_surface_json TEXT NOT NULL,
  expected_evidence TEXT NOT NULL,
  instructions TEXT NOT NULL DEFAULT '',
  research_assisted INTEGER NOT NULL DEFAULT 0
);

-- one bounded coder attempt in its own worktree
CREATE TABLE IF NOT EXISTS attempts (
  id INTEGER PRIMARY KEY,
  assignment_id INTEGER NOT NULL REFERENCES assignments(id),
  cycle_id INTEGER NOT NULL REFERENCES cycles(id),
  agent TEXT NOT NULL,           -- coder-1, coder-2, ...
  base_commit TEXT NOT NULL,
  status TEXT NOT NULL,          -- pending|coding|coded|checking|passed|failed
  outcome TEXT,                  -- passed|agent_error|no_change|surface_violation|gate:<REASON>|budget
  detail TEXT,
  commit_sha TEXT,
  changed_files_json TEXT,
  agent_report TEXT,
  check_json TEXT,
  evidence_dir TEXT,
  started_at REAL,
  finished_at REAL
);

-- everything that passed the orchestrator's check (and the starting solution)
CREATE TABLE IF NOT EXISTS candidates (
  id INTEGER PRIMARY KEY,
  origin TEXT NOT NULL,          -- start|attempt|synthesis
  attempt_id INTEGER,
  cycle_id INTEGER,
  commit_sha TEXT NOT NULL,
  parent_ids_json TEXT NOT NULL DEFAULT '[]',
  status TEXT NOT NULL,          -- checked|pending_final|evaluating|promoted|rejected|not_better|skipped|invalidated
  final_rank INTEGER,
  check_ratio REAL,              -- geomean(best latency / this latency) in the check (>1: faster)
  final_json TEXT,
  speedup REAL,                  -- mean over public workloads of reference latency / latency (final)
  mean_latency_ms REAL,
  improvement REAL,              -- geomean(best / this) at the final, best re-measured alongside
  reason TEXT,
  evidence_dir TEXT NOT NULL,
  created_at REAL NOT NULL,
  decided_at REAL
);

-- the current best's history: one row per promotion (the starting solution's baseline included)
CREATE TABLE IF NOT EXISTS promotions (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  previous_best INTEGER,
  at REAL NOT NULL,
  active_s REAL NOT NULL,
  tokens INTEGER NOT NULL,
  cost_usd REAL NOT NULL,
  speedup REAL,
  mean_latency_ms REAL,
  improvement REAL,
  invalidated_at REAL
);

CREATE TABLE IF NOT EXISTS profiles (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  status TEXT NOT NULL,          -- pending|running|done|failed
  tool TEXT,
  summary TEXT,
  path TEXT,
  created_at REAL NOT NULL,
  finished_at REAL
);

-- every agent turn: tokens, cost and time per agent and role
CREATE TABLE IF NOT EXISTS turns (
  id INTEGER PRIMARY KEY,
  role TEXT NOT NULL,
  agent TEXT NOT NULL,
  backend TEXT,
  model TEXT,
  cycle_id INTEGER,
  attempt_id INTEGER,
  direction_id INTEGER,
  ok INTEGER NOT NULL,
  error TEXT,
  session_id TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  duration_s REAL NOT NULL DEFAULT 0,
  started_at REAL NOT NULL,
  text TEXT
);

-- device time: every lease that was held (GPU or CPU pseudo-device)
CREATE TABLE IF NOT EXISTS device_usage (
  id INTEGER PRIMARY KEY,
  device TEXT NOT NULL,
  kind TEXT NOT NULL,            -- turn|check|official|profile
  holder TEXT NOT NULL,
  role TEXT NOT NULL,
  seconds REAL NOT NULL,
  started_at REAL NOT NULL
);

-- live view for the console (rewritten by the orchestrator)
CREATE TABLE IF NOT EXISTS leases_live (
  holder TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  device TEXT,                   -- NULL: waiting for a device
  since REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS agents (
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  backend TEXT NOT NULL,
  model TEXT,
  worktree TEXT,
  session_id TEXT
);

CREATE TABLE IF NOT EXISTS notes (
  id INTEGER PRIMARY KEY,
  at REAL NOT NULL,
  source TEXT NOT NULL,          -- operator|orchestrator
  text TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS operator_events (
  id INTEGER PRIMARY KEY,
  at REAL NOT NULL,
  command TEXT NOT NULL,
  args_json TEXT NOT NULL,
  result TEXT
);

CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY,
  at REAL NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT
);
"""


class StateError(Exception):
    """The run folder has no state, or the state file is not a kernelwright run."""


def db_path(run_dir: Path) -> Path:
    return Path(run_dir) / DB_NAME


class State:
    """Access to one run's SQLite file.

    One connection per thread.  Writes go through :meth:`tx`; reads through :meth:`rows` /
    :meth:`row` / :meth:`value`.  Raises :class:`StateError` when ``create`` is False and
    the file does not exist or is not a run.
    """

    def __init__(self, run_dir: Path, create: bool = False):
        self.run_dir = Path(run_dir)
        self.path = db_path(self.run_dir)
        if not create and not self.path.is_file():
            raise StateError(f"{self.run_dir}: not a run folder (no {DB_NAME})")
        self._local = threading.local()
        if create:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            conn.executescript(SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        else:
            try:
                version = self.value("SELECT value FROM meta WHERE key='schema_version'")
            except sqlite3.DatabaseError as exc:
                raise StateError(f"{self.path}: not a kernelwright run state ({exc})") from None
            if version is None:
                raise StateError(f"{self.path}: not a kernelwright run state")
            if int(version) != SCHEMA_VERSION:
                raise StateError(f"{self.path}: state schema {version}, this kernelwright reads {SCHEMA_VERSION}")

    # -- connections -------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextmanager
    def tx(self) -> Iterator["Tx"]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on error)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield Tx(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    # -- reads -------------------------------------------------------------------------------
    def rows(self, sql: str, *args: Any) -> List[sqlite3.Row]:
        return list(self._conn().execute(sql, args))

    def row(self, sql: str, *args: Any) -> Optional[sqlite3.Row]:
        return self._conn().execute(sql, args).fetchone()

    def value(self, sql: str, *args: Any) -> Any:
        r = self._conn().execute(sql, args).fetchone()
        return None if r is None else r[0]

    def run(self) -> sqlite3.Row:
        r = self.row("SELECT * FROM runs LIMIT 1")
        if r is None:
            raise StateError(f"{self.path}: no run recorded")
        return r

    def config(self) -> Dict[str, Any]:
        return json.loads(self.run()["config_json"])

    # -- writes used everywhere -------------------------------------------------------------
    @staticmethod
    def event(conn: "sqlite3.Connection | Tx", kind: str, message: str, **data: Any) -> None:
        """Append an event (inside the caller's transaction)."""
        conn.execute("INSERT INTO events(at, kind, message, data_json) VALUES (?,?,?,?)",
                     (time.time(), kind, message, json.dumps(data, default=str) if data else None))

    def add_event(self, kind: str, message: str, **data: Any) -> None:
        with self.tx() as c:
            self.event(c, kind, message, **data)

    # -- what the orchestrator reads ---------------------------------------------------------
    def cycle(self, cycle_id: int) -> Optional[sqlite3.Row]:
        return self.row("SELECT * FROM cycles WHERE id=?", cycle_id)

    def cycles(self, status: str) -> List[sqlite3.Row]:
        """The cycles in ``status``, oldest first."""
        return self.rows("SELECT * FROM cycles WHERE status=? ORDER BY id", status)

    def open_cycle(self) -> Optional[sqlite3.Row]:
        """The first cycle that is neither done nor failed."""
        return self.row("SELECT * FROM cycles WHERE status NOT IN ('done','failed') ORDER BY idx LIMIT 1")

    def next_cycle_idx(self) -> int:
        return (self.value("SELECT MAX(idx) FROM cycles") or 0) + 1

    def failed_cycles_in_a_row(self) -> int:
        """How many of the latest cycles failed (planning found no valid plan), counted back from the last."""
        n = 0
        for c in self.rows("SELECT status FROM cycles ORDER BY idx DESC"):
            if c["status"] != "failed":
                break
            n += 1
        return n

    def cycle_base_candidate(self, cycle_id: int) -> Optional[int]:
        return self.value("SELECT base_candidate FROM cycles WHERE id=?", cycle_id)

    def cycle_base_commit(self, cycle_id: int) -> Optional[str]:
        """The commit the cycle's coders started from."""
        return self.value("SELECT base_commit FROM attempts WHERE cycle_id=? LIMIT 1", cycle_id)

    def attempts(self, status: str) -> List[sqlite3.Row]:
        """The attempts in ``status``, oldest first."""
        return self.rows("SELECT * FROM attempts WHERE status=? ORDER BY id", status)

    def cycle_attempts(self, cycle_id: int, status: Optional[str] = None) -> List[sqlite3.Row]:
        if status is None:
            return self.rows("SELECT * FROM attempts WHERE cycle_id=? ORDER BY id", cycle_id)
        return self.rows("SELECT * FROM attempts WHERE cycle_id=? AND status=? ORDER BY id", cycle_id, status)

    def direction_attempts(self, direction_id: int) -> List[sqlite3.Row]:
        return self.rows("SELECT at.* FROM attempts at JOIN assignments asg ON asg.id=at.assignment_id "
                         "WHERE asg.direction_id=? ORDER BY at.id", direction_id)

    def attempt_agent(self, attempt_id: int) -> Optional[str]:
        return self.value("SELECT agent FROM attempts WHERE id=?", attempt_id)

    def started_attempts(self) -> int:
        return self.value("SELECT COUNT(*) FROM attempts WHERE started_at IS NOT NULL")

    def agent_errors_in_a_row(self) -> int:
        """How many of the latest finished coder turns failed on the agent side."""
        n = 0
        for a in self.rows("SELECT outcome FROM attempts WHERE status IN ('passed','failed','coded') "
                           "ORDER BY finished_at DESC"):
            if a["outcome"] != "agent_error":
                break
            n += 1
        return n

    def assignment(self, assignment_id: int) -> sqlite3.Row:
        """The assignment with its direction's name and research brief and its cycle's index."""
        return self.row("SELECT asg.*, d.name AS direction, d.research_brief, c.idx AS cycle_idx FROM assignments asg "
                        "JOIN directions d ON d.id=asg.direction_id JOIN cycles c ON c.id=asg.cycle_id "
                        "WHERE asg.id=?", assignment_id)

    def candidate_of_attempt(self, attempt_id: int) -> Optional[sqlite3.Row]:
        return self.row("SELECT * FROM candidates WHERE attempt_id=?", attempt_id)

    def next_final(self, cycle_id: int) -> Optional[sqlite3.Row]:
        """The cycle's best-ranked candidate waiting for its final evaluation."""
        return self.row("SELECT * FROM candidates WHERE cycle_id=? AND status='pending_final' "
                        "ORDER BY final_rank LIMIT 1", cycle_id)

    def open_finals(self, cycle_id: int) -> int:
        """The cycle's candidates waiting for, or in, their final evaluation."""
        return self.value("SELECT COUNT(*) FROM candidates WHERE cycle_id=? AND status IN "
                          "('pending_final','evaluating')", cycle_id)

    def profiles(self, status: str) -> List[sqlite3.Row]:
        return self.rows("SELECT * FROM profiles WHERE status=? ORDER BY id", status)

    def profiles_in_progress(self) -> int:
        return self.value("SELECT COUNT(*) FROM profiles WHERE status IN ('pending','running')")

    def directions(self, *statuses: str) -> List[sqlite3.Row]:
        """The directions in one of ``statuses`` (all of them without), oldest first."""
        if not statuses:
            return self.rows("SELECT * FROM directions ORDER BY id")
        marks = ",".join("?" * len(statuses))
        return self.rows(f"SELECT * FROM directions WHERE status IN ({marks}) ORDER BY id", *statuses)

    def agent_session(self, agent: str) -> Optional[str]:
        return self.value("SELECT session_id FROM agents WHERE name=?", agent)

    # -- accounting --------------------------------------------------------------------------
    def totals(self) -> Dict[str, float]:
        """Tokens (all prompt + output tokens), cost (USD), turns, attempts, cycles so far."""
        r = self.row("SELECT COALESCE(SUM(input_tokens+output_tokens+cache_read_tokens+cache_write_tokens),0) AS tok,"
                     " COALESCE(SUM(cost_usd),0) AS cost, COUNT(*) AS n FROM turns")
        return {"tokens": int(r["tok"]), "cost_usd": float(r["cost"]), "turns": int(r["n"]),
                "attempts": int(self.value("SELECT COUNT(*) FROM attempts")),
                "cycles": int(self.value("SELECT COUNT(*) FROM cycles")),
                "device_s": float(self.value("SELECT COALESCE(SUM(seconds),0) FROM device_usage"))}

    # -- recovery ----------------------------------------------------------------------------
    def recover(self) -> List[str]:
        """Put steps that were claimed but never finished (the process died) back in the queue.

        Returns one line per step put back.  Finished steps are untouched.
        """
        lines = []
        with self.tx() as c:
            for table, running, back in (("attempts", "coding", "pending"), ("attempts", "checking", "coded"),
                                         ("candidates", "evaluating", "pending_final"),
                                         ("profiles", "running", "pending"),
                                         ("directions", "researching", "research_requested")):
                ids = [r[0] for r in c.execute(f"SELECT id FROM {table} WHERE status=?", (running,))]
                if ids:
                    c.execute(f"UPDATE {table} SET status=? WHERE status=?", (back, running))
                    lines.append(f"{table} {ids}: {running} -> {back}")
            c.execute("DELETE FROM leases_live")
            if lines:
                self.event(c, "recover", "unfinished steps put back in the queue", steps=lines)
        return lines


class Tx:
    """One write transaction of a :class:`State` (what :meth:`State.tx` yields): the
    orchestrator's reads and writes inside a transaction as typed methods, ``execute`` for the
    rest (run creation, the operator console).  Times are UNIX seconds."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, args)

    def event(self, kind: str, message: str, **data: Any) -> None:
        State.event(self.conn, kind, message, **data)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> sqlite3.Row:
        return self.execute("SELECT * FROM runs").fetchone()

    def start_session(self, status: str, control: str, pid: int, at: float) -> None:
        self.execute("UPDATE runs SET status=?, control=?, pid=?, heartbeat_at=?, sessions=sessions+1, stop_reason=NULL",
                     (status, control, pid, at))

    def end_session(self, status: str, reason: Optional[str], clear_leases: bool = True) -> None:
        """The orchestrator exits: the run's final status, no pid (and no live leases)."""
        self.execute("UPDATE runs SET status=?, stop_reason=?, pid=NULL", (status, reason))
        if clear_leases:
            self.execute("DELETE FROM leases_live")

    def set_run_status(self, status: str) -> None:
        self.execute("UPDATE runs SET status=?", (status,))

    def add_active_time(self, seconds: float, at: float) -> None:
        """The orchestrator's running time and heartbeat."""
        self.execute("UPDATE runs SET active_s=active_s+?, heartbeat_at=?", (seconds, at))

    def wait_for_operator(self, message: str, **data: Any) -> None:
        self.execute("UPDATE runs SET status='waiting_operator'")
        self.event("escalated", message, **data)

    def set_best(self, candidate_id: int) -> None:
        self.execute("UPDATE runs SET best_candidate=?", (candidate_id,))

    def add_promotion(self, candidate_id: int, previous_best: Optional[int], at: float, active_s: float, tokens: int,
                      cost_usd: float, speedup: Optional[float], mean_latency_ms: Optional[float],
                      improvement: Optional[float]) -> None:
        self.execute("INSERT INTO promotions(candidate_id, previous_best, at, active_s, tokens, cost_usd, speedup, "
                     "mean_latency_ms, improvement) VALUES (?,?,?,?,?,?,?,?,?)",
                     (candidate_id, previous_best, at, active_s, tokens, cost_usd, speedup, mean_latency_ms,
                      improvement))

    def add_note(self, source: str, text: str, at: float) -> None:
        self.execute("INSERT INTO notes(at, source, text) VALUES (?,?,?)", (at, source, text))

    # -- devices -----------------------------------------------------------------------------
    def replace_live_leases(self, leases: List[Dict[str, Any]]) -> None:
        """The console's view of the leases: {holder, kind, device (None while waiting), since} each."""
        self.execute("DELETE FROM leases_live")
        for s in leases:
            self.execute("INSERT OR REPLACE INTO leases_live(holder, kind, device, since) VALUES (?,?,?,?)",
                         (s["holder"], s["kind"], s["device"], s["since"]))

    def add_device_usage(self, device: str, kind: str, holder: str, role: str, seconds: float,
                         started_at: float) -> None:
        self.execute("INSERT INTO device_usage(device, kind, holder, role, seconds, started_at) VALUES (?,?,?,?,?,?)",
                     (device, kind, holder, role, seconds, started_at))

    # -- cycles ------------------------------------------------------------------------------
    def cycle(self, cycle_id: int) -> sqlite3.Row:
        return self.execute("SELECT * FROM cycles WHERE id=?", (cycle_id,)).fetchone()

    def add_cycle(self, idx: int, base_candidate: Optional[int], at: float) -> int:
        """A new cycle in status planning; returns its id."""
        return self.execute("INSERT INTO cycles(idx, status, base_candidate, created_at) VALUES (?,?,?,?)",
                            (idx, "planning", base_candidate, at)).lastrowid

    def set_cycle_status(self, cycle_id: int, status: str, only_from: Optional[str] = None) -> None:
        if only_from is None:
            self.execute("UPDATE cycles SET status=? WHERE id=?", (status, cycle_id))
        else:
            self.execute("UPDATE cycles SET status=? WHERE id=? AND status=?", (status, cycle_id, only_from))

    def fail_cycle(self, cycle_id: int, error: str, at: float) -> None:
        self.execute("UPDATE cycles SET status='failed', error=?, finished_at=? WHERE id=?", (error, at, cycle_id))

    def start_coding(self, cycle_id: int, plan_json: str, base_candidate: Optional[int]) -> None:
        """The cycle's plan is in: its attempts may start."""
        self.execute("UPDATE cycles SET status='coding', plan_json=?, base_candidate=? WHERE id=?",
                     (plan_json, base_candidate, cycle_id))

    def set_synthesis(self, cycle_id: int, record_json: str) -> None:
        self.execute("UPDATE cycles SET synthesis_json=? WHERE id=?", (record_json, cycle_id))

    def finish_cycle(self, cycle_id: int, at: float) -> None:
        self.execute("UPDATE cycles SET status='done', finished_at=? WHERE id=?", (at, cycle_id))

    # -- directions and assignments ----------------------------------------------------------
    def direction(self, direction_id: int) -> sqlite3.Row:
        return self.execute("SELECT * FROM directions WHERE id=?", (direction_id,)).fetchone()

    def direction_named(self, name: str) -> Optional[sqlite3.Row]:
        return self.execute("SELECT * FROM directions WHERE name=?", (name,)).fetchone()

    def add_direction(self, name: str, origin: str, description: str, at: float) -> int:
        return self.execute("INSERT INTO directions(name, origin, description, status, created_at) VALUES (?,?,?,?,?)",
                            (name, origin, description, "open", at)).lastrowid

    def set_direction_status(self, direction_id: int, status: str) -> None:
        self.execute("UPDATE directions SET status=? WHERE id=?", (status, direction_id))

    def open_direction(self, direction_id: int, research_brief: str) -> None:
        """Back to open, with this research brief (or why there is none)."""
        self.execute("UPDATE directions SET status='open', research_brief=? WHERE id=?", (research_brief, direction_id))

    def direction_succeeded(self, direction_id: int) -> None:
        self.execute("UPDATE directions SET successes=successes+1, failed_attempts=0, research_failed_attempts=0 "
                     "WHERE id=?", (direction_id,))

    def direction_failed(self, direction_id: int, failed: int, research_failed: int, status: str) -> None:
        """New failure counts and status (research_requested and escalated stick once set)."""
        self.execute("UPDATE directions SET failed_attempts=?, research_failed_attempts=?, status=?, "
                     "research_requested=research_requested OR ?, operator_escalated=operator_escalated OR ? "
                     "WHERE id=?", (failed, research_failed, status, status == "research_requested",
                                    status == "escalated", direction_id))

    def add_assignment(self, cycle_id: int, direction_id: int, hypothesis: str, target_regime: str,
                       edit_surface_json: str, expected_evidence: str, instructions: str,
                       research_assisted: int) -> int:
        return self.execute("INSERT INTO assignments(cycle_id, direction_id, hypothesis, target_regime, "
                            "edit_surface_json, expected_evidence, instructions, research_assisted) "
                            "VALUES (?,?,?,?,?,?,?,?)",
                            (cycle_id, direction_id, hypothesis, target_regime, edit_surface_json,
                             expected_evidence, instructions, research_assisted)).lastrowid

    # -- attempts ----------------------------------------------------------------------------
    def count_attempts(self) -> int:
        return self.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]

    def add_attempt(self, assignment_id: int, cycle_id: int, agent: str, base_commit: str) -> None:
        self.execute("INSERT INTO attempts(assignment_id, cycle_id, agent, base_commit, status) VALUES (?,?,?,?,?)",
                     (assignment_id, cycle_id, agent, base_commit, "pending"))

    def cycle_attempt_outcomes(self, cycle_id: int) -> List[sqlite3.Row]:
        """The cycle's attempts with their assignment's direction_id and research_assisted."""
        return list(self.execute("SELECT at.*, asg.direction_id, asg.research_assisted FROM attempts at JOIN "
                                 "assignments asg ON asg.id=at.assignment_id WHERE at.cycle_id=?", (cycle_id,)))

    def set_attempt_status(self, attempt_id: int, status: str, started_at: Optional[float] = None) -> None:
        if started_at is None:
            self.execute("UPDATE attempts SET status=? WHERE id=?", (status, attempt_id))
        else:
            self.execute("UPDATE attempts SET status=?, started_at=? WHERE id=?", (status, started_at, attempt_id))

    def fail_attempt(self, attempt_id: int, outcome: str, detail: Optional[str], at: float,
                     only_pending: bool = False) -> None:
        sql = "UPDATE attempts SET status='failed', outcome=?, detail=?, finished_at=? WHERE id=?"
        self.execute(sql + (" AND status='pending'" if only_pending else ""), (outcome, detail, at, attempt_id))

    def record_coding(self, attempt_id: int, status: str, outcome: Optional[str], detail: Optional[str],
                      commit_sha: Optional[str], changed_files_json: str, agent_report: str, evidence_dir: str,
                      finished_at: Optional[float]) -> None:
        """What the coder's turn produced (status coded, or failed with its outcome)."""
        self.execute("UPDATE attempts SET status=?, outcome=?, detail=?, commit_sha=?, changed_files_json=?, "
                     "agent_report=?, evidence_dir=?, finished_at=? WHERE id=?",
                     (status, outcome, detail, commit_sha, changed_files_json, agent_report, evidence_dir,
                      finished_at, attempt_id))

    def record_check(self, attempt_id: int, status: str, outcome: str, detail: Optional[str], check_json: str,
                     at: float, keep_detail: bool = False) -> None:
        """The orchestrator's check of a coded attempt (``keep_detail``: leave the detail column)."""
        if keep_detail:
            self.execute("UPDATE attempts SET status=?, outcome=?, check_json=?, finished_at=? WHERE id=?",
                         (status, outcome, check_json, at, attempt_id))
        else:
            self.execute("UPDATE attempts SET status=?, outcome=?, detail=?, check_json=?, finished_at=? WHERE id=?",
                         (status, outcome, detail, check_json, at, attempt_id))

    # -- candidates --------------------------------------------------------------------------
    def candidate(self, candidate_id: int) -> sqlite3.Row:
        return self.execute("SELECT * FROM candidates WHERE id=?", (candidate_id,)).fetchone()

    def candidate_id_of_attempt(self, attempt_id: int) -> Optional[int]:
        r = self.execute("SELECT id FROM candidates WHERE attempt_id=?", (attempt_id,)).fetchone()
        return None if r is None else r["id"]

    def add_candidate(self, origin: str, attempt_id: Optional[int], cycle_id: int, commit_sha: str,
                      parent_ids_json: str, check_ratio: Optional[float], evidence_dir: str, at: float) -> int:
        """A candidate in status checked; returns its id."""
        return self.execute("INSERT INTO candidates(origin, attempt_id, cycle_id, commit_sha, parent_ids_json, status, "
                            "check_ratio, evidence_dir, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                            (origin, attempt_id, cycle_id, commit_sha, parent_ids_json, "checked", check_ratio,
                             evidence_dir, at)).lastrowid

    def set_candidate_status(self, candidate_id: int, status: str) -> None:
        self.execute("UPDATE candidates SET status=? WHERE id=?", (status, candidate_id))

    def queue_final(self, candidate_id: int, rank: int) -> None:
        self.execute("UPDATE candidates SET status='pending_final', final_rank=? WHERE id=?", (rank, candidate_id))

    def decide_candidate(self, candidate_id: int, status: str, reason: str, at: float) -> None:
        """A decision without a final evaluation (not_better, skipped, rejected)."""
        self.execute("UPDATE candidates SET status=?, reason=?, decided_at=? WHERE id=?",
                     (status, reason, at, candidate_id))

    def record_final(self, candidate_id: int, status: str, reason: Optional[str], final_json: str,
                     speedup: Optional[float], mean_latency_ms: Optional[float], improvement: Optional[float],
                     at: float) -> None:
        self.execute("UPDATE candidates SET status=?, reason=?, final_json=?, speedup=?, mean_latency_ms=?, "
                     "improvement=?, decided_at=? WHERE id=?",
                     (status, reason, final_json, speedup, mean_latency_ms, improvement, at, candidate_id))

    def skip_pending_finals(self, cycle_id: int, reason: str, at: float) -> None:
        self.execute("UPDATE candidates SET status='skipped', reason=?, decided_at=? "
                     "WHERE cycle_id=? AND status='pending_final'", (reason, at, cycle_id))

    def promoted_in_cycle(self, cycle_id: int) -> Tuple[set, set]:
        """(the cycle's promoted candidates, the parents of its promoted syntheses)."""
        promoted = {r["id"] for r in self.execute(
            "SELECT id FROM candidates WHERE cycle_id=? AND status='promoted'", (cycle_id,))}
        parents: set = set()
        for r in self.execute("SELECT parent_ids_json FROM candidates WHERE cycle_id=? AND status='promoted' AND "
                              "origin='synthesis'", (cycle_id,)):
            parents.update(loads(r[0], []))
        return promoted, parents

    # -- profiles and turns ------------------------------------------------------------------
    def add_profile(self, candidate_id: int, at: float) -> None:
        self.execute("INSERT INTO profiles(candidate_id, status, created_at) VALUES (?,?,?)",
                     (candidate_id, "pending", at))

    def set_profile_status(self, profile_id: int, status: str) -> None:
        self.execute("UPDATE profiles SET status=? WHERE id=?", (status, profile_id))

    def fail_profile(self, profile_id: int, summary: str) -> None:
        self.execute("UPDATE profiles SET status='failed', summary=? WHERE id=?", (summary, profile_id))

    def finish_profile(self, profile_id: int, status: str, tool: str, summary: str, path: str, at: float) -> None:
        self.execute("UPDATE profiles SET status=?, tool=?, summary=?, path=?, finished_at=? WHERE id=?",
                     (status, tool, summary, path, at, profile_id))

    def add_turn(self, role: str, agent: str, backend: str, model: Optional[str], cycle_id: Optional[int],
                 attempt_id: Optional[int], direction_id: Optional[int], ok: bool, error: Optional[str],
                 session_id: Optional[str], input_tokens: int, output_tokens: int, cache_read_tokens: int,
                 cache_write_tokens: int, cost_usd: float, duration_s: float, started_at: float, text: str) -> None:
        """One agent turn; a session id it returned becomes the agent's current session."""
        self.execute("INSERT INTO turns(role, agent, backend, model, cycle_id, attempt_id, direction_id, ok, error, "
                     "session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, "
                     "duration_s, started_at, text) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (role, agent, backend, model, cycle_id, attempt_id, direction_id, int(bool(ok)), error,
                      session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
                      duration_s, started_at, text))
        if session_id:
            self.execute("UPDATE agents SET session_id=? WHERE name=?", (session_id, agent))


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str, sort_keys=False)


def loads(text: Optional[str], default: Any = None) -> Any:
    if not text:
        return default
    return json.loads(text)
