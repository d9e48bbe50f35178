"""The FlashInfer-Trace data model: loads upstream files unchanged, round-trips, validates."""

import json
import math

import pytest
from pydantic import ValidationError

from kernelwright.trace import (
    Correctness, Definition, Environment, Evaluation, EvaluationStatus, Performance, Solution, Trace, TraceSet,
)
from kernelwright.trace.jsonio import DataFileError, dump_json, iter_jsonl, load_jsonl, load_model, to_plain
from tests.fib_data import require_fib


def test_every_upstream_definition_loads_and_round_trips():
    fib = require_fib()
    files = [p for p in sorted(fib.glob("*.json")) if p.name not in ("contest_workload_axes.json", "baselines.json")]
    assert len(files) >= 20
    for path in files:
        d = load_model(Definition, path)
        raw = json.loads(path.read_text())
        assert d.name == raw["name"]
        assert list(d.inputs) == list(raw["inputs"])  # input order is the calling convention
        back = Definition.model_validate(to_plain(d))
        assert back == d
        # what we write keeps every upstream key with the same value
        plain = to_plain(d)
        for key in ("name", "op_type", "reference", "tags", "constraints"):
            assert plain[key] == raw.get(key, [] if key in ("tags", "constraints") else None)
        for name, spec in raw["inputs"].items():
            assert plain["inputs"][name]["shape"] == spec["shape"]
            assert plain["inputs"][name]["dtype"] == spec["dtype"]


def test_the_19_moe_workload_lines_load_and_round_trip(tmp_path):
    fib = require_fib()
    path = fib / "workloads" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.jsonl"
    traces = load_jsonl(Trace, path)
    assert len(traces) == 19
    assert all(t.is_workload_trace() for t in traces)
    assert {t.workload.inputs["routing_logits"].type for t in traces} == {"safetensors"}
    assert sorted(t.workload.axes["seq_len"] for t in traces)[-1] == 14107
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for t, raw in zip(traces, lines):
        assert to_plain(t) == raw


def test_traceset_layout_round_trip(tmp_path):
    fib = require_fib()
    ts = TraceSet(root=tmp_path)
    d = load_model(Definition, fib / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.json")
    ts.definitions[d.name] = d
    wl = load_jsonl(Trace, fib / "workloads" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.jsonl")
    ts.workloads[wl[0].definition] = wl
    ts.save()
    again = TraceSet.load(tmp_path)
    assert again.definitions[d.name] == d
    assert len(again.workloads[wl[0].definition]) == 19
    assert (tmp_path / "definitions" / d.op_type / f"{d.name}.json").is_file()


def _env():
    return Environment(hardware="NVIDIA H200", libs={"torch": "2.11"})


def test_evaluation_status_rules_match_flashinfer_bench():
    corr = Correctness(max_absolute_error=0.1, max_relative_error=0.01)
    perf = Performance(latency_ms=1.0, reference_latency_ms=10.0, speedup_factor=10.0)
    Evaluation(status="PASSED", environment=_env(), timestamp="t", correctness=corr, performance=perf)
    Evaluation(status="INCORRECT_NUMERICAL", environment=_env(), timestamp="t", correctness=corr)
    Evaluation(status="RUNTIME_ERROR", environment=_env(), timestamp="t")
    with pytest.raises(ValidationError):
        Evaluation(status="PASSED", environment=_env(), timestamp="t", correctness=corr)
    with pytest.raises(ValidationError):
        Evaluation(status="INCORRECT_NUMERICAL", environment=_env(), timestamp="t", correctness=corr, performance=perf)
    with pytest.raises(ValidationError):
        Evaluation(status="TIMEOUT", environment=_env(), timestamp="t", correctness=corr)
    assert {s.value for s in EvaluationStatus} == {"PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL",
                                                   "INCORRECT_DTYPE", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"}


def test_non_finite_errors_serialise_as_strings_and_load_back():
    c = Correctness(max_absolute_error=math.inf, max_relative_error=math.nan)
    text = c.model_dump_json()
    assert '"Infinity"' in text and '"NaN"' in text
    back = Correctness.model_validate_json(text)
    assert math.isinf(back.max_absolute_error) and math.isnan(back.max_relative_error)
    with pytest.raises(ValidationError):
        Correctness(max_absolute_error=-1.0)


def test_solution_validation_and_hash():
    spec = {"language": "triton", "target_hardware": ["H200"], "entry_point": "kernel.py::run"}
    sol = Solution(name="s", definition="d", author="a", spec=spec, sources=[{"path": "kernel.py", "content": "x=1"}])
    assert len(sol.content_hash()) == 40
    other = Solution(name="s2", definition="d", author="b", spec=spec, sources=[{"path": "kernel.py", "content": "x=1"}])
    assert sol.content_hash() == other.content_hash()  # name and author do not change behaviour
    bad = [
        dict(spec={**spec, "entry_point": "kernel.py:run"}),
        dict(sources=[{"path": "other.py", "content": "x"}]),
        dict(sources=[{"path": "../kernel.py", "content": "x"}]),
        dict(sources=[{"path": "/abs/kernel.py", "content": "x"}]),
        dict(sources=[{"path": "kernel.py", "content": "x"}, {"path": "kernel.py", "content": "y"}]),
    ]
    for override in bad:
        fields = dict(name="s", definition="d", author="a", spec=spec, sources=[{"path": "kernel.py", "content": "x"}])
        fields.update(override)
        with pytest.raises(ValidationError):
            Solution(**fields)


def test_definition_validation_rejects_broken_specs():
    base = {"name": "d", "op_type": "x", "axes": {"n": {"type": "var"}},
            "inputs": {"a": {"shape": ["n"], "dtype": "float32"}}, "outputs": {"b": {"shape": ["n"], "dtype": "float32"}},
            "reference": "def run(a):\n    return a\n"}
    Definition.model_validate(base)
    for patch in ({"reference": "def other(a): pass"}, {"reference": "def run(:"},
                  {"outputs": {"a": {"shape": ["n"], "dtype": "float32"}}},
                  {"inputs": {"a": {"shape": ["m"], "dtype": "float32"}}},
                  {"constraints": ["n <"]}, {"inputs": {"a": {"shape": ["n"], "dtype": "float64"}}}):
        with pytest.raises(ValidationError):
            Definition.model_validate({**base, **patch})


def test_bad_files_give_one_line_errors(tmp_path):
    p = tmp_path / "d.json"
    p.write_text("{not json")
    with pytest.raises(DataFileError) as e:
        load_model(Definition, p)
    assert "malformed JSON" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DataFileError) as e:
        load_model(Definition, tmp_path / "missing.json")
    assert "cannot read" in str(e.value)
    j = tmp_path / "w.jsonl"
    j.write_text('{"definition": "x", "workload": {"axes": {}, "inputs": {}, "uuid": "u"}}\n{"definition": 3}\n')
    with pytest.raises(DataFileError) as e:
        list(iter_jsonl(Trace, j))
    assert ":2:" in str(e.value)


def test_our_traces_dump_in_flashinfer_shape(tmp_path):
    from kernelwright import definitions

    b = definitions.get("demo")
    w = b.public_workloads()[0]
    corr = Correctness(max_absolute_error=0.0, max_relative_error=0.0, extra={"matched_ratio": 1.0})
    perf = Performance(latency_ms=0.5, reference_latency_ms=1.0, speedup_factor=2.0, graph_latency_ms=0.4)
    t = Trace(definition=b.name, workload=w, solution="s",
              evaluation=Evaluation(status="PASSED", environment=_env(), timestamp="t", correctness=corr, performance=perf))
    dump_json(t, tmp_path / "t.json")
    raw = json.loads((tmp_path / "t.json").read_text())
    assert set(raw) == {"definition", "workload", "solution", "evaluation"}
    assert {"status", "environment", "timestamp", "log", "correctness", "performance"} <= set(raw["evaluation"])
    assert {"latency_ms", "reference_latency_ms", "speedup_factor"} <= set(raw["evaluation"]["performance"])


def test_shipped_fib_fixtures_match_the_shared_copy():
    """tests/data/fib is a byte-for-byte copy of ../shared/fib (where that exists)."""
    from tests.fib_data import SHARED, SHIPPED

    shipped = sorted(p.relative_to(SHIPPED) for p in SHIPPED.rglob("*.json*"))
    assert len(shipped) >= 21
    if not (SHARED / "workloads").is_dir():
        pytest.skip(f"no shared copy at {SHARED} to compare with")
    for rel in shipped:
        assert (SHIPPED / rel).read_bytes() == (SHARED / rel).read_bytes(), rel


def test_require_fib_fails_under_ci_when_no_data(monkeypatch, tmp_path):
    from pathlib import Path

    import tests.fib_data as fib

    monkeypatch.setattr(fib, "SHARED", tmp_path / "none")
    monkeypatch.setattr(fib, "SHIPPED", tmp_path / "none2")
    monkeypatch.delenv("KW_FIB_DATA", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        fib.require_fib()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        fib.require_fib()
    monkeypatch.setenv("KW_FIB_DATA", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="KW_FIB_DATA"):
        fib.require_fib()
    monkeypatch.setattr(fib, "SHIPPED", Path(fib.__file__).resolve().parent / "data" / "fib")
    monkeypatch.delenv("KW_FIB_DATA")
    assert fib.require_fib() == fib.SHIPPED
