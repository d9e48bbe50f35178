"""Shared machinery of the CLI backends: finding the binary, running it with a
time limit while streaming its JSONL stdout into a parser, and logging."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, List, Optional

from .base import (
    AgentBackend,
    AgentEvent,
    AgentUnavailable,
    AttemptFailure,
    EventLog,
    TurnRequest,
    TurnResult,
)

#: env var naming a directory where ``npm install --prefix DIR`` put the clients
CLIENTS_DIR_ENV = "KW_AGENT_CLIENTS"

_TERM_GRACE_S = 3.0


def find_binary(name: str, explicit: Optional[str] = None) -> Optional[str]:
    """Locate a client executable.

    Order: ``explicit`` (a path, or a name looked up on PATH), then PATH, then
    ``node_modules/.bin`` of the clients folder: ``$KW_AGENT_CLIENTS`` when set, else the
    ``.agent-clients`` folder that ``tests/agents/install_clients.sh`` fills, in the current
    directory or in the source checkout kernelwright runs from.  Returns an absolute path or None.
    """
    if explicit:
        if os.sep in explicit:
            p = Path(explicit).expanduser()
            return str(p.resolve()) if p.is_file() and os.access(p, os.X_OK) else None
        return shutil.which(explicit)
    found = shutil.which(name)
    if found:
        return found
    for clients in client_dirs():
        cand = clients / "node_modules" / ".bin" / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand.resolve() if cand.is_symlink() else cand)
    return None


def client_dirs() -> List[Path]:
    """Where installed agent clients are looked for (see ``find_binary``)."""
    env = os.environ.get(CLIENTS_DIR_ENV)
    if env:
        return [Path(env).expanduser()]
    checkout = Path(__file__).resolve().parents[3]      # src/kernelwright/agents/_cli.py -> repo root
    dirs = [Path.cwd() / ".agent-clients", checkout / ".agent-clients"]
    return list(dict.fromkeys(d for d in dirs if d.is_dir()))


@dataclass
class ProcOutcome:
    """How a client process ended."""

    returncode: Optional[int]
    timed_out: bool
    stderr_tail: str
    duration_s: float
    stopped_early: Optional[str] = None


def run_streaming(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    on_line: Callable[[str], Optional[str]],
    log_path: Optional[Path],
    stdin_text: Optional[str] = None,
    stderr_tail_lines: int = 40,
) -> ProcOutcome:
    """Run ``argv`` in ``cwd``; feed each stdout line (without newline) to ``on_line``.

    ``on_line`` may return a non-empty string to stop the process early (the
    reason ends up in :attr:`ProcOutcome.stopped_early`).  The process runs in
    its own session; on timeout the whole process group gets SIGTERM, then
    SIGKILL after a grace period.  Raises ``FileNotFoundError`` /
    ``PermissionError`` if the binary cannot be started.
    """
    start = time.monotonic()
    log = open(log_path, "w", encoding="utf-8", errors="replace") if log_path else None
    log_lock = threading.Lock()

    def write_log(prefix: str, text: str) -> None:
        if log is not None:
            with log_lock:
                log.write(prefix + text + "\n")
                log.flush()

    write_log("# argv: ", json.dumps(argv[:1] + [a if len(a) < 2000 else a[:2000] + "...(cut)" for a in argv[1:]]))
    write_log("# cwd: ", str(cwd))
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=env,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except BaseException:
        if log is not None:
            log.close()
        raise

    stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
    stop_reason: list[str] = []

    def kill_group(sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def read_stdout() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            write_log("", line)
            if stop_reason:
                continue
            try:
                reason = on_line(line)
            except Exception as exc:  # noqa: BLE001 - parser bug: record, keep draining
                reason = None
                write_log("# parser error: ", repr(exc))
            if reason:
                stop_reason.append(reason)
                kill_group(signal.SIGTERM)

    def read_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            stderr_tail.append(line)
            write_log("[stderr] ", line)

    def write_stdin() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write((stdin_text or "").encode("utf-8"))
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    threads = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
    if stdin_text is not None:
        threads.append(threading.Thread(target=write_stdin, daemon=True))
    for t in threads:
        t.start()

    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(signal.SIGTERM)
        try:
            proc.wait(timeout=_TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(signal.SIGKILL)
            proc.wait()
    # children that outlive the leader could keep the pipes open: bound the wait
    for t in threads:
        t.join(timeout=5.0)
    if any(t.is_alive() for t in threads):
        kill_group(signal.SIGKILL)
        for t in threads:
            t.join(timeout=2.0)
    duration = time.monotonic() - start
    write_log("# exit: ", f"returncode={proc.returncode} timed_out={timed_out} duration_s={duration:.2f}")
    if log is not None:
        log.close()
    return ProcOutcome(
        returncode=proc.returncode,
        timed_out=timed_out,
        stderr_tail="\n".join(stderr_tail),
        duration_s=duration,
        stopped_early=stop_reason[0] if stop_reason else None,
    )


class StreamParser:
    """Base of the JSONL stream parsers.

    Feed it stdout lines; it keeps a bounded :class:`EventLog` and counts lines
    that look like JSON but do not parse (``malformed``).  Subclasses implement
    :meth:`handle` and :meth:`finish`.
    """

    def __init__(self, max_events: int = 500) -> None:
        self.events = EventLog(max_events)
        self.malformed = 0
        self.first_malformed: Optional[str] = None
        self.lines = 0

    def feed(self, line: str) -> Optional[str]:
        """Consume one stdout line; return a reason string to stop the client early."""
        self.lines += 1
        stripped = line.strip()
        if not stripped:
            return None
        if not stripped.startswith("{"):
            self.events.add(AgentEvent(type="raw", text=stripped[:2000]))
            return None
        try:
            obj = json.loads(stripped)
        except ValueError:
            self.malformed += 1
            if self.first_malformed is None:
                self.first_malformed = stripped[:200]
            self.events.add(AgentEvent(type="malformed", text=stripped[:2000]))
            return None
        if not isinstance(obj, dict):
            self.malformed += 1
            return None
        return self.handle(obj)

    @abstractmethod
    def handle(self, obj: dict[str, Any]) -> Optional[str]:
        """Handle one parsed JSON object."""

    @abstractmethod
    def finish(self, outcome: ProcOutcome) -> TurnResult:
        """Build the attempt's result; raise :class:`AttemptFailure` on failure."""

    # helpers for subclasses ---------------------------------------------------

    def base_result(self, **kw: Any) -> TurnResult:
        return TurnResult(events=self.events.to_list(), events_dropped=self.events.dropped, **kw)

    def fail_common(self, outcome: ProcOutcome, partial: TurnResult, have_final: bool) -> None:
        """Raise the right :class:`AttemptFailure` for process-level problems."""
        if outcome.stopped_early:
            raise AttemptFailure("limit", outcome.stopped_early, retryable=False, partial=partial)
        if outcome.timed_out:
            raise AttemptFailure("timeout", f"timed out after {outcome.duration_s:.0f}s", partial=partial)
        if not have_final:
            if outcome.returncode not in (0, None):
                raise AttemptFailure(
                    "exit", f"client exited with status {outcome.returncode}: {_tail(outcome.stderr_tail)}",
                    partial=partial,
                )
            raise AttemptFailure(
                "malformed",
                "no final result event in the client's output"
                + (f" ({self.malformed} malformed line(s))" if self.malformed else "")
                + (f"; stderr: {_tail(outcome.stderr_tail)}" if outcome.stderr_tail.strip() else ""),
                partial=partial,
            )
        if self.malformed:
            raise AttemptFailure(
                "malformed", f"{self.malformed} malformed JSON line(s), first: {self.first_malformed!r}",
                partial=partial,
            )


def _tail(text: str, limit: int = 300) -> str:
    text = " | ".join(ln for ln in text.strip().splitlines()[-5:] if ln.strip())
    return text[-limit:] if text else "(no stderr)"


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


class CliBackend(AgentBackend):
    """A backend that runs an external agent CLI once per turn."""

    binary_name: ClassVar[str] = ""
    default_credentials: ClassVar[list[str]] = []
    install_hint: ClassVar[str] = ""
    #: env vars always set for the client (unless overridden in config.env / request env)
    default_env: ClassVar[dict[str, str]] = {}

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._version: Optional[str] = None

    # --------------------------------------------------------------- check

    def resolve_binary(self) -> Optional[str]:
        return find_binary(self.binary_name, self.config.binary)

    def check(self) -> None:
        """Raise :class:`AgentUnavailable` (one line) if the client cannot run.

        Checks that the binary exists and ``--version`` succeeds within 30 s,
        and that a credential env var is set.
        """
        binary = self.resolve_binary()
        if binary is None:
            where = self.config.binary or (f"`{self.binary_name}` on PATH or in node_modules/.bin of "
                                           f"${CLIENTS_DIR_ENV} or ./.agent-clients")
            raise AgentUnavailable(f"{self.name}: client binary not found: {where} ({self.install_hint})")
        if self._version is None:
            try:
                proc = subprocess.run(
                    [binary, "--version"], capture_output=True, text=True, timeout=30,
                    env=self.child_env(None), stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise AgentUnavailable(f"{self.name}: `{binary} --version` failed: {exc}") from None
            if proc.returncode != 0:
                raise AgentUnavailable(
                    f"{self.name}: `{binary} --version` exited {proc.returncode}: {_tail(proc.stderr or proc.stdout)}"
                )
            self._version = (proc.stdout.strip().splitlines() or ["?"])[0]
        self.require_credential(self.default_credentials)

    @property
    def client_version(self) -> Optional[str]:
        """The first line of ``--version`` after a successful :meth:`check`."""
        return self._version

    # --------------------------------------------------------------- running

    def child_env(self, req: Optional[TurnRequest]) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.default_env)
        env.update(self.config.env)
        if req is not None:
            env.update(req.env)
        return env

    @abstractmethod
    def build_command(self, req: TurnRequest, binary: str, env: dict[str, str]) -> tuple[list[str], Optional[str]]:
        """Return (argv, stdin text); may add to ``env`` in place.

        Implementations place :attr:`AgentConfig.extra_args` where the client
        accepts options."""

    @abstractmethod
    def new_parser(self, req: TurnRequest) -> StreamParser:
        """A fresh parser for one attempt."""

    def after_success(self, req: TurnRequest, result: TurnResult) -> TurnResult:
        """Hook to post-process a successful attempt."""
        return result

    def _attempt(self, req: TurnRequest, attempt: int) -> TurnResult:
        binary = self.resolve_binary()
        if binary is None:
            raise AttemptFailure("unavailable", f"{self.name}: client binary `{self.binary_name}` not found",
                                 retryable=False)
        env = self.child_env(req)
        argv, stdin_text = self.build_command(req, binary, env)
        parser = self.new_parser(req)
        log_path = self.log_path(req, attempt)
        try:
            outcome = run_streaming(
                argv, cwd=Path(req.workspace), env=env, timeout_s=self.turn_timeout(req),
                on_line=parser.feed, log_path=log_path, stdin_text=stdin_text,
            )
        except OSError as exc:
            raise AttemptFailure("unavailable", f"{self.name}: cannot start {binary}: {exc}", retryable=False) from None
        try:
            result = parser.finish(outcome)
        except AttemptFailure as fail:
            if fail.partial is not None:
                fail.partial.raw_log_path = log_path
            raise
        result.raw_log_path = log_path
        return self.after_success(req, result)
