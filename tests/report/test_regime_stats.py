"""Per-regime statistics of the bench summary (issue 5: "report per-regime latency, achieved TB/s
and TFLOP/s, and the speedup vs the PyTorch reference"): means over each regime's trusted passes,
in summary.json, the HTML report and `kernelwright report --markdown --regimes`."""

import json
import subprocess
import sys
from pathlib import Path

from kernelwright import definitions
from kernelwright.report.html import _regime_table, write_report
from kernelwright.report.summary import summarize, summarize_folder
from kernelwright.trace import Correctness, Environment, Evaluation, GateReport, Performance, Trace
from kernelwright.trace.jsonio import to_plain


def _trace(builtin, workload, latency_ms, tbps, tflops, speedup, status="PASSED", suspicious=False):
    perf = Performance(latency_ms=latency_ms, reference_latency_ms=latency_ms * speedup, speedup_factor=speedup)
    gate = GateReport(suspicious=suspicious,
                      notes={"roofline": {"achieved_TBps": tbps, "achieved_TFLOPs": tflops}})
    ev = Evaluation(status=status, environment=Environment(hardware="H200", libs={}), timestamp="t",
                    correctness=Correctness(max_absolute_error=0.0, max_relative_error=0.0), performance=perf, gate=gate)
    return Trace(definition=builtin.name, workload=workload, solution="ours", evaluation=ev)


def _traces():
    b = definitions.get("moe")
    by_t = {w.axes["seq_len"]: w for w in b.public_workloads()}
    return b, [
        _trace(b, by_t[1], 0.10, 0.5, 1.0, 30.0),
        _trace(b, by_t[57], 0.30, 2.5, 15.0, 40.0),
        _trace(b, by_t[80], 0.30, 2.0, 10.0, 50.0, suspicious=True),   # not a trusted pass: left out
        _trace(b, by_t[14107], 2.0, 1.0, 700.0, 25.0),
    ]


def test_regime_stats_are_means_over_trusted_passes():
    b, traces = _traces()
    s = summarize({b.name: traces}, {b.name: b}, {})
    stats = s["definitions"][b.name]["solutions"]["ours"]["regime_stats"]
    decode, prefill = b.regime({"seq_len": 1}), b.regime({"seq_len": 14107})
    assert stats[decode]["workloads"] == 2
    assert abs(stats[decode]["latency_us"] - 200.0) < 1e-9
    assert abs(stats[decode]["achieved_TBps"] - 1.5) < 1e-9
    assert abs(stats[decode]["achieved_TFLOPs"] - 8.0) < 1e-9
    assert abs(stats[decode]["speedup_vs_reference"] - 35.0) < 1e-9
    assert stats[prefill] == {"workloads": 1, "latency_us": 2000.0, "achieved_TBps": 1.0,
                              "achieved_TFLOPs": 700.0, "speedup_vs_reference": 25.0}
    html = _regime_table(s["definitions"][b.name])
    assert "achieved TB/s" in html and "700.0" in html and "1.50" in html


def test_results_table_rebuilds_old_summaries_from_their_traces(tmp_path):
    b, traces = _traces()
    folder = tmp_path / "2026-01-01" / "moe"
    folder.mkdir(parents=True)
    with open(folder / f"{b.name}.jsonl", "w") as fh:
        for t in traces:
            fh.write(json.dumps(to_plain(t)) + "\n")
    old = summarize_folder(folder)
    for sol in old["definitions"][b.name]["solutions"].values():
        del sol["regime_stats"]                      # as written before the field existed
    (folder / "summary.json").write_text(json.dumps(old))
    r = subprocess.run([sys.executable, "-m", "kernelwright", "report", "--markdown", "--regimes",
                        str(folder / "summary.json")], capture_output=True, text=True, check=True)
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| 2026-01-01/moe")]
    assert len(rows) == 2
    assert "| 2 | 200.0 | 1.50 | 8.0 | 35.0× |" in rows[0]
    assert json.loads((folder / "summary.json").read_text()) == old      # the file is left as it is
    page = write_report(folder).read_text()                                # and the HTML report has them
    assert "achieved TFLOP/s" in page and "<td>35.0</td>" in page


def test_workload_table_merges_summaries_of_the_same_workloads(tmp_path):
    """`kernelwright report --workloads moe --ours ours A B`: one row per workload, our latency, the
    floor of our run, every other candidate's latency and its ratio to ours, the means last."""
    b, traces = _traces()
    paths = []
    for name, scale in (("ours", 1.0), ("theirs", 2.0)):
        folder = tmp_path / name
        folder.mkdir()
        with open(folder / f"{b.name}.jsonl", "w") as fh:
            for t in traces:
                t = t.model_copy(update={"solution": name})
                t.evaluation.performance.latency_ms *= scale
                fh.write(json.dumps(to_plain(t)) + "\n")
        (folder / "summary.json").write_text(json.dumps(summarize_folder(folder)))
        paths.append(str(folder))
    r = subprocess.run([sys.executable, "-m", "kernelwright", "report", "--workloads", "moe", "--ours", "ours",
                        *paths], capture_output=True, text=True, check=True)
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("| workload | axes | ours µs | floor µs | floor / ours | theirs µs | theirs / ours |")
    rows = lines[2:-1]
    assert len(rows) == 4
    assert rows[0].split(" | ")[1:5] == ["seq_len=1", "100.0", "—", "—"]      # no floor in these traces
    assert rows[0].endswith("| 200.0 | 2.00 |")
    assert lines[-1].endswith("| **2.00** (min 2.00) |")


def test_a_speedup_far_below_one_keeps_two_significant_digits():
    from kernelwright.report.markdown import _ratio

    assert _ratio(0.0056) == "0.0056×" and _ratio(2.345) == "2.3×" and _ratio(None) == "—"


def test_a_quick_summary_matches_its_definition_with_or_without_the_suffix():
    """CPU results always come from --quick (``demo_rmsnorm_h512__quick``): ``report --workloads
    demo`` takes them (newcomer run, 2026-12-02)."""
    from kernelwright.report.markdown import _definition_matches, _shipped_name

    quick = "demo_rmsnorm_h512__quick"
    assert _definition_matches(quick, "demo") and _definition_matches(quick, "demo_rmsnorm_h512")
    assert _definition_matches(quick, quick) and _definition_matches("demo_rmsnorm_h512", "demo")
    assert not _definition_matches(quick, "moe")
    assert _shipped_name(quick) == _shipped_name("demo") == "kernelwright_demo_rmsnorm_triton"
