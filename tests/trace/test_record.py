"""What a trace says about how it was judged survives an upstream round trip (issue 21, item 4):
the tolerance and checker, the definition's origin and locator, whether the guards ran and
whether the gate found it suspicious, in ``correctness.extra`` and the log's first line, beside
kernelwright's own ``gate`` block (which flashinfer-bench drops)."""

import json

from kernelwright.trace import (
    Correctness, Definition, Environment, Evaluation, EvaluationStatus, GateReport, Performance, RandomInput, Trace,
    TraceSet, Workload, record,
)
from kernelwright.trace.jsonio import load_model

from tests.fib_data import require_fib
from tests.upstream import load_with_upstream

DEFAULT = {"atol": 0.01, "rtol": 0.01, "required_matched_ratio": 1.0}


def _record(**changes):
    base = dict(checker="elementwise", tolerance=DEFAULT, default=DEFAULT,
                definition={"name": "gdn_decode_qk4_v8_d128_k_last", "origin": "file", "locator": "file:/x.json#sha256=ab"},
                guards_on=True, split="public", suspicious=False, reasons=[])
    base.update(changes)
    return record.judged_by(**base)


def _trace(rec, status=EvaluationStatus.PASSED, uuid="w1"):
    corr = Correctness(extra={"matched_ratio": 1.0, record.EXTRA_KEY: rec}) if status == EvaluationStatus.PASSED else None
    perf = Performance(latency_ms=1.0, reference_latency_ms=2.0, speedup_factor=2.0) if corr else None
    ev = Evaluation(status=status, environment=Environment(hardware="cpu"), timestamp="2026-12-01T00:00:00",
                    log=record.log_line(rec) + "\nmore", correctness=corr, performance=perf,
                    gate=GateReport(reasons=rec["reasons"], suspicious=rec["suspicious"]))
    return Trace(definition="gdn_decode_qk4_v8_d128_k_last", solution="s",
                 workload=Workload(uuid=uuid, axes={"batch_size": 1}, inputs={"q": RandomInput()}), evaluation=ev)


def test_the_log_line_says_it_in_words():
    line = record.log_line(_record(tolerance={**DEFAULT, "atol": 0.5}, guards_on=False, suspicious=True,
                                   reasons=["BELOW_ROOFLINE"]))
    assert line.startswith("[kernelwright] guards=OFF suspicious=yes(BELOW_ROOFLINE) checker=elementwise atol=0.5")
    assert "LOOSER than the definition's default atol=0.01" in line
    assert "definition=gdn_decode_qk4_v8_d128_k_last origin=file locator=file:/x.json#sha256=ab" in line
    assert "\n" not in line
    clean = record.log_line(_record())
    assert "guards=on suspicious=no" in clean and "(definition default)" in clean


def test_the_record_is_read_back_without_the_gate_block():
    for rec, status in ((_record(suspicious=True, reasons=["BELOW_ROOFLINE"]), EvaluationStatus.PASSED),
                        (_record(guards_on=False, reasons=["TIMEOUT"]), EvaluationStatus.TIMEOUT)):
        data = json.loads(_trace(rec, status).model_dump_json())
        data["evaluation"].pop("gate")                          # what flashinfer-bench's models keep
        back = Trace.model_validate(data)
        assert back.evaluation.gate is None and record.read(back) == rec
    assert record.read(Trace(definition="d", workload=Workload(uuid="u", axes={}, inputs={}))) is None


def test_suspicious_and_unguarded_traces_keep_saying_so_after_upstreams_loader(tmp_path):
    fib = require_fib()
    ts = TraceSet(root=tmp_path)
    ts.add_definition(load_model(Definition, fib / "gdn_decode_qk4_v8_d128_k_last.json"))
    susp = _record(suspicious=True, reasons=["BELOW_ROOFLINE"])
    unguarded = _record(guards_on=False)
    looser = _record(tolerance={**DEFAULT, "required_matched_ratio": 0.5})
    ts.add_traces([_trace(susp, uuid="a"), _trace(unguarded, uuid="b"), _trace(looser, uuid="c"),
                   _trace(_record(reasons=["WORKLOAD_INPUT"]), EvaluationStatus.RUNTIME_ERROR, uuid="d")])
    assert (tmp_path / "traces" / "gdn" / "gdn_decode_qk4_v8_d128_k_last.jsonl").is_file()
    loaded = load_with_upstream(tmp_path)
    traces = loaded["traces"]["gdn_decode_qk4_v8_d128_k_last"]
    assert len(traces) == 4 and all("gate" not in t["evaluation"] for t in traces)     # upstream dropped it
    back = {t["workload"]["uuid"]: record.read(Trace.model_validate(t)) for t in traces}
    assert back["a"]["suspicious"] and back["a"]["reasons"] == ["BELOW_ROOFLINE"]
    assert back["b"]["guards"] is False
    assert back["c"]["looser"] and back["c"]["tolerance"]["required_matched_ratio"] == 0.5
    assert back["d"]["reasons"] == ["WORKLOAD_INPUT"]                                  # from the log line alone
    assert traces[0]["evaluation"]["correctness"]["extra"][record.EXTRA_KEY]["suspicious"] is True
