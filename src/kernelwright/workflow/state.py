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
from typing import Any, Dict, Iterator, List, Optional

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
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on error)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
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
    def event(conn: sqlite3.Connection, kind: str, message: str, **data: Any) -> None:
        """Append an event (inside the caller's transaction)."""
        conn.execute("INSERT INTO events(at, kind, message, data_json) VALUES (?,?,?,?)",
                     (time.time(), kind, message, json.dumps(data, default=str) if data else None))

    def add_event(self, kind: str, message: str, **data: Any) -> None:
        with self.tx() as c:
            self.event(c, kind, message, **data)

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


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str, sort_keys=False)


def loads(text: Optional[str], default: Any = None) -> Any:
    if not text:
        return default
    return json.loads(text)
