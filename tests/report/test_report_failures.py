"""report.html for failed workloads (issue 21, item 4): each failed workload's status, codes and
reason in the per-workload table, no latency point for it (a red cross on the axis instead),
labelled axes."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelwright import definitions  # noqa: E402
from kernelwright.report import html as H  # noqa: E402
from kernelwright.report.summary import summarize  # noqa: E402
from kernelwright.trace import (  # noqa: E402
    Correctness, Environment, Evaluation, EvaluationStatus, GateReport, Performance, RandomInput, ScalarInput, Trace,
    Workload,
)
from kernelwright.trace.jsonio import append_jsonl  # noqa: E402

DEMO = definitions.get("demo").quick_variant()
ENV = Environment(hardware="cpu")


def _workload(tokens):
    return Workload(uuid=f"demo-rmsnorm-t{tokens}", axes={"num_tokens": tokens},
                    inputs={"x": RandomInput(), "weight": RandomInput(), "eps": ScalarInput(value=1e-6)})


def _passed(tokens, ms):
    ev = Evaluation(status=EvaluationStatus.PASSED, environment=ENV, timestamp="t", correctness=Correctness(),
                    performance=Performance(latency_ms=ms, reference_latency_ms=ms, speedup_factor=1.0, clock="cpu"),
                    gate=GateReport())
    return Trace(definition=DEMO.name, workload=_workload(tokens), solution="s", evaluation=ev)


def _failed(tokens, detail):
    ev = Evaluation(status=EvaluationStatus.RUNTIME_ERROR, environment=ENV, timestamp="t", log="traceback...\n",
                    gate=GateReport(reasons=["WORKLOAD_INPUT"], detail=detail))
    return Trace(definition=DEMO.name, workload=_workload(tokens), solution="s", evaluation=ev)


DETAIL = "input 'x' of workload demo-rmsnorm-t7: blob/x.safetensors (under /data): safetensors file not found"


def _summary():
    traces = [_passed(1, 0.5), _failed(7, DETAIL), _passed(33, 0.9)]
    return traces, summarize({DEMO.name: traces}, {DEMO.name: DEMO}, {"s": {"label": "my kernel", "role": "solution"}})


def test_the_per_workload_table_shows_status_codes_and_reason():
    _, summary = _summary()
    d = summary["definitions"][DEMO.name]
    row = next(r for r in d["workloads"] if r["uuid"] == "demo-rmsnorm-t7")
    assert row["status"]["s"] == "RUNTIME_ERROR" and row["detail"]["s"] == DETAIL
    assert "s" not in row["latency_us"]                            # no latency for a failed workload
    table = H._workload_table(d)
    assert "RUNTIME_ERROR WORKLOAD_INPUT" in table and "safetensors file not found" in table
    assert d["solutions"]["s"]["failures"][0]["detail"] == DETAIL


def test_a_failed_workload_draws_no_latency_point_and_the_axes_are_labelled():
    _, summary = _summary()
    d = summary["definitions"][DEMO.name]
    rows = sorted(d["workloads"], key=lambda r: tuple(r["axes"].values()))
    fig, ax = plt.subplots()
    H._latency_by_workload(ax, rows, ["s"], {"s": "my kernel"})
    points = next(line for line in ax.lines if line.get_label() == "my kernel")
    assert list(points.get_xdata()) == [0, 2]                      # t1 and t33; t7 failed
    cross = next(line for line in ax.lines if line.get_label() == "failed (no latency point)")
    assert list(cross.get_xdata()) == [1]
    assert ax.get_xticklabels()[1].get_color() == "#c00"
    assert ax.get_xlabel().startswith("workload")
    plt.close(fig)
    fig, ax = plt.subplots()
    for r in rows:
        r["x"] = r["axes"]["num_tokens"]
    H._latency_by_size(ax, rows, ["s"], {"s": "my kernel"}, "tokens T")
    cross = next(line for line in ax.lines if line.get_label() == "failed (no latency point)")
    assert list(cross.get_xdata()) == [7] and ax.get_xlabel() == "tokens T"
    plt.close(fig)


def test_write_report_renders_failures_from_the_traces(tmp_path):
    traces, summary = _summary()
    for row in summary["definitions"][DEMO.name]["workloads"]:
        row.pop("detail")                                          # a summary written before the field existed
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    append_jsonl(traces, tmp_path / "traces" / f"{DEMO.name}.jsonl")
    page = H.write_report(tmp_path).read_text()
    assert "per workload" in page and "safetensors file not found" in page
    assert page.count("data:image/png;base64") == 2
