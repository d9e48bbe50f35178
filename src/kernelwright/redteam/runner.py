"""Run the red-team catalogue and the canaries through the real gate.

Every case is evaluated exactly as ``kernelwright eval`` would (a spawned worker, the parent's
references, every guard), with short iteration counts.  A case's verdict is PASS, SUSPICIOUS
(passed, but marked) or REJECT with the gate's reason codes; the case is ``ok`` when that matches
its expectation.  Cases run two at a time (each in its own worker; the parent's work is mostly
waiting), except the ones that write shared files, which run alone afterwards.

The run uses a private kernelwright cache (``KERNELWRIGHT_CACHE`` pointed at a temporary folder,
unless the caller set one): the file-editing cases then plant their files there, and the
held-out split uses a fresh hidden salt.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from kernelwright.gate import guards
from kernelwright.redteam.catalogue import CASES, Case, get_case
from kernelwright.redteam.verdicts import ERROR, PASS, REJECT, SKIPPED, SUSPICIOUS
from kernelwright.trace import Trace

# a held-out workload larger than this is too slow for the Triton interpreter on CPU
_CPU_HELD_OUT_CAP = {"num_tokens": 64, "batch_size": 8, "seq_len": 64}


@dataclass
class CaseResult:
    case: Case
    verdict: str                 # PASS | SUSPICIOUS | REJECT | SKIPPED | ERROR
    reasons: List[str] = field(default_factory=list)
    ok: bool = False
    detail: str = ""
    latency_ms: Optional[float] = None
    seconds: float = 0.0
    warnings: List[str] = field(default_factory=list)
    isolation: Optional[str] = None    # the OS boundary the case's worker had (gate.notes.isolation.level)
    timing: Dict = field(default_factory=dict)   # the deciding trace's clocks and notes.clock (see _timing)

    def as_dict(self) -> Dict:
        return {"case": self.case.id, "hack": self.case.hack, "hid": self.case.hid, "definition": self.case.definition,
                "needs_cuda": self.case.needs_cuda, "needs_cpu": self.case.needs_cpu, "expected": self.case.expected_label, "verdict": self.verdict,
                "reasons": self.reasons, "ok": self.ok, "detail": self.detail, "latency_ms": self.latency_ms,
                "seconds": round(self.seconds, 2), "warnings": self.warnings,
                "isolation": self.isolation, "timing": self.timing}


def gate_config(device: str):
    """Short iteration counts: enough for every guard (a twin and samples per trial, the
    determinism re-run, two trials)."""
    from kernelwright.gate.evaluate import GateConfig

    if device == "cpu":
        return GateConfig(device="cpu", warmup=1, iterations=4, trials=2, reference_warmup=0,
                          reference_iterations=1, graph_iterations=0, cupti_tracing=False)
    return GateConfig(device=device, warmup=2, iterations=10, trials=2, reference_iterations=3,
                      graph_iterations=3)


def _verdict(traces: List[Trace]):
    """(verdict, reasons, deciding trace) over a case's traces: the first rejection decides."""
    for t in traces:
        if not t.passed:
            gate = t.evaluation.gate
            return REJECT, list(gate.reasons if gate else [t.evaluation.status.value]), t
    for t in traces:
        gate = t.evaluation.gate
        if gate and gate.suspicious:
            return SUSPICIOUS, list(gate.reasons), t
    return PASS, [], traces[0] if traces else None


def _latency(trace: Optional[Trace], host: bool = False) -> Optional[float]:
    """The deciding trace's headline latency (ms), or with ``host`` its eager latency (host
    included; the headline where no eager latency was recorded); a rejected trace's from the
    gate's notes."""
    if trace is None or trace.evaluation is None:
        return None
    ev = trace.evaluation
    if ev.performance is not None:
        eager = ev.performance.eager_latency_ms if host else None
        return eager if eager is not None else ev.performance.latency_ms
    notes = ev.gate.notes if ev.gate else {}
    eager = notes.get("measured_eager_latency_ms") if host else None
    # ``is None``, not ``or``: an eager latency fooled down to 0.0 must not be replaced by the
    # headline (device time, which never held the host sleep the floor is about)
    value = eager if eager is not None else notes.get("measured_latency_ms")
    return float(value) if value is not None else None


def _timing(trace: Optional[Trace]) -> Dict:
    """What the deciding trace's clocks read (ms) and why its headline took the clock it did:
    the evidence behind a latency a case's ``min_latency_ms`` judges."""
    if trace is None or trace.evaluation is None:
        return {}
    ev = trace.evaluation
    out: Dict = {}
    perf = ev.performance
    if perf is not None:
        out.update({k: getattr(perf, k, None) for k in ("clock", "latency_ms", "eager_latency_ms",
                                                        "graph_latency_ms", "kernel_time_ms", "kernel_span_ms")})
        out["samples_ms"] = list(getattr(perf, "latency_samples_ms", None) or [])[:20]
    notes = ev.gate.notes if ev.gate else {}
    if notes.get("clock"):
        out["notes_clock"] = notes["clock"]
    return out


def isolation_of(traces: List[Trace]) -> Optional[str]:
    """The weakest OS boundary any of ``traces`` was evaluated behind (None: not recorded)."""
    from kernelwright.gate.sandbox import LEVELS

    levels = []
    for t in traces:
        gate = t.evaluation.gate if t.evaluation else None
        note = (gate.notes or {}).get("isolation") if gate else None
        if isinstance(note, dict) and note.get("level") in LEVELS:
            levels.append(note["level"])
    return max(levels, key=LEVELS.index) if levels else None


def _judge(case: Case, verdict: str, reasons: List[str], latency: Optional[float], isolation: Optional[str] = None,
           host_latency: Optional[float] = None):
    expected = case.expected_for(isolation)
    if expected == PASS:
        ok = verdict == PASS
        why = "" if ok else f"expected PASS, got {verdict} ({', '.join(reasons)})"
    else:
        want = SUSPICIOUS if case.suspicious else REJECT
        ok = verdict == want and bool(set(reasons) & set(expected))
        why = "" if ok else f"expected {want} with one of {sorted(expected)}, got {verdict} {reasons}"
    if ok and case.min_latency_ms is not None and (latency is None or latency < case.min_latency_ms):
        ok = False
        why = f"measured latency {latency} ms < {case.min_latency_ms} ms: the timer was fooled"
    if ok and case.min_host_latency_ms is not None and (host_latency is None or host_latency < case.min_host_latency_ms):
        ok = False
        why = f"eager latency {host_latency} ms < {case.min_host_latency_ms} ms: the timer was fooled"
    return ok, why


def _held_out(builtin_full, salt: str, device: str):
    from kernelwright.gate.hidden import held_out_workloads

    def keep(axes):
        return device != "cpu" or all(axes.get(k, 0) <= v for k, v in _CPU_HELD_OUT_CAP.items())

    for attempt in range(8):
        found = held_out_workloads(builtin_full, salt if attempt == 0 else f"{salt}/{attempt}", keep)
        if found:
            return found[:1] if device == "cpu" else found[:2]
    return []


def run_case(case: Case, device: str, out_root: Path, cfg=None, log: Callable[[str], None] = lambda s: None) -> CaseResult:
    """Evaluate one case through the gate (public quick workloads, and the held-out split when
    the case asks for it).

    A case that does not expect FILE_TAMPERED but gets it is run once more: in a shared checkout
    someone may have edited the gate's or the definitions' sources while the case ran (the gate
    cannot tell who changed a protected file).  The retry is noted in the result."""
    first = _run_case_once(case, device, out_root, cfg, log, attempt=0)
    expected = set() if case.expected == PASS else set(case.expected)
    if guards.FILE_TAMPERED in first.reasons and guards.FILE_TAMPERED not in expected:
        again = _run_case_once(case, device, out_root, cfg, log, attempt=1)
        again.warnings.append(f"retried: the first run was rejected with FILE_TAMPERED ({first.detail[:200]})")
        return again
    return first


def _run_case_once(case: Case, device: str, out_root: Path, cfg, log, attempt: int) -> CaseResult:
    from dataclasses import replace

    from kernelwright import definitions

    started = time.perf_counter()
    if case.needs_cuda and not device.startswith("cuda"):
        return CaseResult(case, SKIPPED, ok=True, detail="needs CUDA (run with --device cuda on a GPU)")
    if case.needs_cpu and device.startswith("cuda"):
        return CaseResult(case, SKIPPED, ok=True, detail=f"CPU only: {case.needs_cpu}")
    if case.nonces and case.nonce_for(device) is None:
        return CaseResult(case, SKIPPED, ok=True, detail=f"no input nonce pinned for {device} (Case.nonces: "
                                                            f"the draws differ by device)")
    cfg = cfg or gate_config(device)
    if case.nonces:
        cfg = replace(cfg, nonce=case.nonce_for(device))
    solution = case.solution()
    full = definitions.get(case.definition)
    quick = full.quick_variant()
    workloads = [quick.public_workloads()[i] for i in case.workloads]
    name = case.id if attempt == 0 else f"{case.id}.retry{attempt}"
    out_dir = bench_results_folder(name) if case.bench_results else Path(out_root) / name
    try:
        return _evaluate_case(case, cfg, solution, full, quick, workloads, out_dir, device, log, started)
    finally:
        if case.bench_results:
            shutil.rmtree(out_dir, ignore_errors=True)
            try:
                out_dir.parent.rmdir()       # kw-results/, when nothing else is in it
            except OSError:
                pass


def bench_results_folder(name: str) -> Path:
    """A results folder as ``kernelwright bench`` leaves one by default (``kw-results/<run>`` in the
    working directory: outside the private /tmp, which hides every temp folder behind the boundary
    anyway; made with mode 0755 and 0644 files, as the bench's are): a ``summary.json`` whose
    ``meta.config.nonce`` is a fresh nonce and a rival's trace in ``traces/``, the two things a
    solution reading the folder would be after.  The caller removes it."""
    import json
    import secrets

    folder = Path.cwd() / "kw-results" / f"redteam-{name}-{secrets.token_hex(4)}"
    (folder / "traces").mkdir(parents=True)
    for d in (folder, folder / "traces"):
        os.chmod(d, 0o755)
    (folder / "summary.json").write_text(json.dumps({"meta": {"config": {"nonce": secrets.token_hex(8)}}}))
    (folder / "traces" / "rival.jsonl").write_text(json.dumps({"solution": "rival", "evaluation": {
        "status": "PASSED", "performance": {"latency_ms": 0.5}}}) + "\n")
    for f in (folder / "summary.json", folder / "traces" / "rival.jsonl"):
        os.chmod(f, 0o644)
    return folder


def _evaluate_case(case: Case, cfg, solution, full, quick, workloads, out_dir: Path, device: str, log,
                   started: float) -> CaseResult:
    """``_run_case_once`` once its configuration and results folder are settled."""
    from dataclasses import replace

    from kernelwright.gate.bench import evaluations
    from kernelwright.gate.evaluate import SolutionRun
    from kernelwright.gate.guards import static_scan
    from kernelwright.gate.hidden import hidden_salt
    from kernelwright.gate.session import WorkerSession

    warnings = [f"{f.code}: {f.message}" for f in static_scan({s.path: s.content for s in solution.sources})]
    session = WorkerSession(solution, cfg.device, log_dir=out_dir / "logs", isolation=case.isolation)
    run = SolutionRun(session, label=case.id, warnings=list(warnings))
    rival = None
    if case.companion:    # a rival evaluated first on the same workload contexts, as in one bench
        companion = get_case(case.companion)
        rival = SolutionRun(WorkerSession(companion.solution(), cfg.device, log_dir=out_dir / "companion-logs",
                                          isolation=companion.isolation or case.isolation), label=companion.id)
    traces: List[Trace] = []
    try:
        for _, judged, trace in evaluations(quick, workloads, cfg, [rival, run] if rival is not None else [run]):
            if judged is rival:
                if not trace.passed:
                    raise RuntimeError(f"the companion {case.companion} did not pass: {trace.evaluation.gate.reasons}")
                continue
            traces.append(trace)
            if not trace.passed:
                break
        if case.held_out and traces and all(t.passed for t in traces):
            hcfg = replace(cfg, split="hidden", salt=hidden_salt())
            traces += [trace for _, _, trace in evaluations(full, _held_out(full, hcfg.salt, device), hcfg, [run])]
    except Exception as exc:  # the runner itself failed: report, never hide
        session.close()
        if rival is not None:
            rival.session.close()
        return CaseResult(case, ERROR, detail=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - started,
                          warnings=warnings)
    finally:
        session.close()
        if rival is not None:
            rival.session.close()
    verdict, reasons, deciding = _verdict(traces)
    latency = _latency(deciding)
    isolation = isolation_of(traces)
    ok, why = _judge(case, verdict, reasons, latency, isolation, _latency(deciding, host=True))
    detail = why
    if deciding is not None and verdict != PASS:
        gate = deciding.evaluation.gate
        headline = (gate.detail if gate is not None and gate.detail else "") or _log_headline(deciding.evaluation.log or "")
        detail = f"{why}: {headline}" if why else headline
    if case.held_out and verdict == PASS and len(traces) <= len(workloads):
        ok, detail = False, "no held-out workload was evaluated"
    result = CaseResult(case, verdict, reasons, ok, detail, latency, time.perf_counter() - started, warnings,
                        isolation, _timing(deciding))
    log(f"{case.id}: {verdict} {reasons} ({'ok' if ok else 'UNEXPECTED'})")
    return result


def _log_headline(log: str) -> str:
    """The line of a trace log that says what happened: for a Python traceback its last line
    (the exception and its message), otherwise the first line; at most 300 characters."""
    lines = [ln for ln in log.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        return lines[-1].strip()[:300]
    return lines[0][:300]


def select_cases(ids: Optional[Iterable[str]] = None) -> List[Case]:
    return [get_case(i) for i in ids] if ids else list(CASES)


_ENV_LOCK = threading.Lock()


class private_cache:
    """Point KERNELWRIGHT_CACHE at a temporary folder for the duration (unless already set), and
    keep the gate's sources protected (``KERNELWRIGHT_PROTECT_SOURCES`` forced on)."""

    def __enter__(self):
        self.previous = os.environ.get("KERNELWRIGHT_CACHE")
        self.protect = os.environ.get("KERNELWRIGHT_PROTECT_SOURCES")
        os.environ["KERNELWRIGHT_PROTECT_SOURCES"] = "1"
        self.tmp = None
        if not self.previous:
            self.tmp = tempfile.TemporaryDirectory(prefix="kw-redteam-cache-")
            os.environ["KERNELWRIGHT_CACHE"] = self.tmp.name
        return self

    def __exit__(self, *exc):
        if self.protect is None:
            os.environ.pop("KERNELWRIGHT_PROTECT_SOURCES", None)
        else:
            os.environ["KERNELWRIGHT_PROTECT_SOURCES"] = self.protect
        if self.tmp is not None:
            os.environ.pop("KERNELWRIGHT_CACHE", None)
            self.tmp.cleanup()
        return False


def _prepare_parent() -> None:
    """Import everything the parent uses and create the hidden salt before cases run in
    parallel, so that no parent-side write (a .pyc, the salt file) lands in a protected folder
    while another case's worker is being watched."""
    import kernelwright.gate.bench  # noqa: F401
    import kernelwright.gate.evaluate  # noqa: F401
    import kernelwright.gate.hidden as hidden
    import kernelwright.gate.worker  # noqa: F401
    from kernelwright import definitions

    for b in definitions.all_builtins():
        b.quick_variant()
    hidden.hidden_salt()


def run_catalogue(device: str = "cpu", ids: Optional[Iterable[str]] = None, jobs: int = 2,
                  out_root: Optional[Path] = None, log: Callable[[str], None] = lambda s: None,
                  on_result: Callable[[CaseResult], None] = lambda r: None) -> List[CaseResult]:
    """Run the selected cases (all by default); CUDA-only cases are SKIPPED on CPU.
    ``on_result`` is called with each case's result as it ends (in completion order), so that a
    caller can keep what is done when a long run is cut short."""
    cases = select_cases(ids)
    with private_cache():
        _prepare_parent()
        root = Path(out_root) if out_root else Path(tempfile.mkdtemp(prefix="kw-redteam-"))
        results: Dict[str, CaseResult] = {}
        parallel = longest_first([c for c in cases if not c.serial])
        serial = [c for c in cases if c.serial]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for res in pool.map(lambda c: run_case(c, device, root, log=log), parallel):
                results[res.case.id] = res
                on_result(res)
        for c in serial:
            results[c.id] = run_case(c, device, root, log=log)
            _remove_planted_files()
            on_result(results[c.id])
    return [results[c.id] for c in cases]


def longest_first(cases: List[Case]) -> List[Case]:
    """The order the pool takes the parallel cases in: first the ones that take longest (another
    definition than the small demo, a held-out pass, a companion: on CPU 2-5x a demo case), so that
    no long case starts last while the other workers idle; otherwise the catalogue's order.  The
    results keep the catalogue's order either way."""
    return sorted(cases, key=lambda c: c.definition == "demo" and not c.held_out and not c.companion)


def _remove_planted_files() -> None:
    """What the file-planting cases leave behind where no boundary stopped them (plant_pth)."""
    import glob

    from kernelwright.gate.guards import site_dirs

    planted = [os.path.join(d, "kw_redteam_planted.pth") for d in site_dirs()]
    planted += glob.glob(os.path.join(tempfile.gettempdir(), "kw-redteam-replay-*.pt"))   # replay_recorder's
    for path in planted:
        if os.path.exists(path):
            os.unlink(path)
