"""The rough edges a new user hits (issue 21, item 4), each through the command line where it shows:
--timeout, --atol/--rtol/--required-matched-ratio recorded and marked, one-line errors that name
the user's file and line (a solution's SyntaxError, a definition module's), a crashed worker's
exit code, failure lines never cut mid-word, report.html for failed workloads."""

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.report.tables import render_failure, render_summary
from kernelwright.trace import Trace, record
from kernelwright.trace.jsonio import load_jsonl

DEMO = Path(__file__).resolve().parents[2] / "src/kernelwright/solutions/demo_rmsnorm_triton"
LAUNCH = "    _rmsnorm_row[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])"


def _variant(tmp_path, name, body=None, append=None):
    """A copy of the shipped demo solution under another name, its launch line replaced by
    ``body`` or its source extended by ``append``."""
    folder = tmp_path / name
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["name"] = name
    (folder / "manifest.json").write_text(json.dumps(manifest))
    src = (folder / "kernel.py").read_text()
    if body is not None:
        src = src.replace(LAUNCH, body)
    if append is not None:
        src += append
    (folder / "kernel.py").write_text(src)
    return folder


def _invoke(args):
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert "Traceback" not in res.output, res.output
    return res


def _traces(out):
    return {t.solution: t for t in load_jsonl(Trace, next((Path(out) / "traces").glob("*.jsonl")))}


def test_timeout_is_the_per_call_limit_also_inside_the_timed_loop(tmp_path):
    hang_first = _variant(tmp_path, "hang_first", body="    import time\n    time.sleep(600)")
    # 4 correctness calls (3 trials and the determinism re-run), then it hangs in the timed loop
    hang_timed = _variant(tmp_path, "hang_timed", body="    global CALLS\n    CALLS += 1\n    if CALLS > 5:\n"
                                                      "        import time\n        time.sleep(600)\n" + LAUNCH,
                          append="\nCALLS = 0\n")
    out = tmp_path / "out"
    started = time.monotonic()
    res = _invoke(["bench", "--no-shipped", "-s", str(hang_first), "-s", str(hang_timed), "-d", "demo",
                   "--device", "cpu", "--quick", "--limit", "1", "--timeout", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert time.monotonic() - started < 240          # not 300 s per call, nor 600 s per timing phase
    traces = _traces(out)
    first, timed = traces["hang_first"].evaluation, traces["hang_timed"].evaluation
    assert first.status.value == timed.status.value == "TIMEOUT"
    assert first.gate.detail == "no reply within 4 s (--timeout)"
    assert timed.gate.detail == "a call ran past the per-call limit of 4 s (--timeout)"
    assert json.loads((out / "summary.json").read_text())["meta"]["per_call_timeout_s"] == 4


def test_tolerance_overrides_are_recorded_and_a_looser_one_marks_the_row(tmp_path):
    out = tmp_path / "out"
    res = _invoke(["eval", str(DEMO), "--device", "cpu", "--quick", "--limit", "1", "--atol", "0.5",
                   "--required-matched-ratio", "0.9", "--out", str(out)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "kernelwright_demo_rmsnorm_triton (looser tol.)" in flat
    assert ("judged with atol 0.5, rtol 0.01, matched ratio 0.9, looser than the definition's atol 0.01, rtol 0.01, "
            "matched ratio 1") in flat
    trace = next(iter(_traces(out).values()))
    rec = record.read(trace)
    assert rec["looser"] and rec["tolerance"] == {"atol": 0.5, "rtol": 0.01, "required_matched_ratio": 0.9}
    assert rec["default_tolerance"]["atol"] == 0.01 and rec["guards"] is True
    assert trace.evaluation.correctness.extra["kernelwright"] == rec
    assert "LOOSER than the definition's default" in trace.evaluation.log.splitlines()[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["config"]["atol"] == 0.5
    bad = _invoke(["eval", str(DEMO), "--device", "cpu", "--quick", "--required-matched-ratio", "1.5"])
    assert bad.exit_code == 2 and "must be between 0 and 1" in bad.output


def test_errors_name_the_users_file_and_line_and_a_crashed_workers_exit_code(tmp_path):
    syntax = _variant(tmp_path, "bad_syntax", append="\n\ndef broken(:\n    pass\n")
    line = (syntax / "kernel.py").read_text().splitlines().index("def broken(:") + 1
    crash = _variant(tmp_path, "bad_exit", body="    import os\n    os._exit(3)")
    raises = _variant(tmp_path, "bad_raise", body="    raise ValueError('no good ' * 40)")
    out = tmp_path / "out"
    res = _invoke(["bench", "--no-shipped", "-s", str(syntax), "-s", str(crash), "-s", str(raises), "-d", "demo",
                   "--device", "cpu", "--quick", "--limit", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"kernel.py, line {line}: SyntaxError: invalid syntax" in res.output
    assert "worker died (connection closed; exit code 3)" in res.output or "exit code 3)" in res.output
    assert re.search(r"kernel\.py, line \d+: ValueError: no good", res.output)
    assert "kwsol_" not in res.output
    for trace in _traces(out).values():
        assert "kwsol_" not in trace.evaluation.log and "kw-solution-" not in trace.evaluation.log
        assert "\n" not in trace.evaluation.gate.detail


def test_a_definition_module_with_a_syntax_error_is_one_line(tmp_path, monkeypatch):
    module = tmp_path / "kw_broken_defs.py"
    module.write_text("from kernelwright.definitions import get\n\nBUILTIN = get('demo'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = _invoke(["eval", str(DEMO), "-d", "kw_broken_defs:BUILTIN", "--device", "cpu", "--quick"])
    assert res.exit_code == 2
    assert f"{module}, line 3: SyntaxError" in " ".join(res.output.split())
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_a_failure_line_is_never_cut_mid_word():
    detail = ("kernel.py, line 12: RuntimeError: the accumulator overflowed while reducing the second "
              "block of rows because the scale factor exceeded its documented range " * 3).strip()
    console = Console(width=60, record=True, color_system=None)
    render_failure(console, "my_solution", {"workload": "demo-rmsnorm-t7", "status": "RUNTIME_ERROR",
                                            "reasons": ["EXCEPTION"], "detail": detail})
    text = console.export_text()
    assert all(len(line) <= 60 for line in text.splitlines())
    assert " ".join(text.split()).endswith(" ".join(detail.split()))       # every word, whole, in order
    words = set(detail.split())
    for line in text.splitlines()[1:]:
        assert all(w in words for w in line.split()), line                # wrapped between words only


def test_render_summary_prints_every_failure_reason_whole():
    detail = "input 'x' of workload w: blob/x.safetensors (under /data/set): safetensors file not found " * 2
    summary = {"definitions": {"demo": {"regimes": ["all"], "workloads": [], "solutions": {"s": {
        "label": "s", "role": "solution", "workloads": 1, "passed": 0, "suspicious": 0, "all_passed": False,
        "mean_latency_us": None, "clocks": {}, "mean_speedup_vs_reference": None, "speedup_vs": {},
        "mean_roofline_fraction": None, "min_roofline_fraction": None, "regime_latency_us": {},
        "failures": [{"workload": "w", "status": "RUNTIME_ERROR", "reasons": ["WORKLOAD_INPUT"],
                      "detail": detail.strip()}]}}}}}
    console = Console(width=80, record=True, color_system=None)
    render_summary(summary, console)
    assert " ".join(detail.split()) in " ".join(console.export_text().split())


@pytest.mark.parametrize("content, expected", [
    ("[]", "not a kernelwright summary"), ('"str"', "not a kernelwright summary"),
    ('{"definitions": 5}', "not a kernelwright summary"), ('{"definitions": {"x": []}}', "not a kernelwright summary"),
    ("{bad", "malformed JSON"),
])
@pytest.mark.parametrize("args", [["--markdown"], []])
def test_report_on_a_summary_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path, content, expected, args):
    (tmp_path / "summary.json").write_text(content)
    res = CliRunner().invoke(app, ["report", str(tmp_path), *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and expected in lines[0] and "summary.json" in lines[0]


def test_report_options_that_need_another_are_usage_errors(tmp_path):
    for args in (["--regimes"], ["--ours", "x"]):
        res = CliRunner().invoke(app, ["report", str(tmp_path), *args])
        assert res.exit_code == 2 and "needs --" in res.output


def test_export_traceset_onto_a_file_is_one_line(tmp_path):
    dest = tmp_path / "afile"
    dest.write_text("x")
    res = CliRunner().invoke(app, ["export-traceset", str(tmp_path), str(dest)])
    assert res.exit_code == 2 and "not a folder" in res.output and "Traceback" not in res.output


def test_solutions_export_onto_a_file_is_one_line(tmp_path):
    dest = tmp_path / "afile"
    dest.write_text("x")
    res = _invoke(["solutions", "export", str(dest)])
    assert res.exit_code == 2 and "Not a directory" in res.output


def test_a_manifest_naming_its_definition_by_alias_says_so(tmp_path):
    folder = _variant(tmp_path, "aliased")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["definition"] = "demo"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    res = _invoke(["eval", str(folder), "--device", "cpu", "--quick"])
    assert res.exit_code == 2 and "alias 'demo'" in res.output and "demo_rmsnorm_h512" in res.output
