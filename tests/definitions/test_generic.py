"""FlashInfer-Bench definition JSONs as definitions (issue 21, item 1): the reference runs where it
is called (the parent), inputs follow upstream's random convention and the constraints, and the
built-in's rules win when the name is a built-in's."""

import json

import pytest
import torch

from kernelwright import definitions
from kernelwright.definitions import generic
from kernelwright.definitions.base import ReferenceFailed
from kernelwright.definitions.fixed import WorkloadInputError
from kernelwright.inputs import make_generator
from kernelwright.trace import Workload
from kernelwright.trace.jsonio import DataFileError

from tests.fib_data import require_fib

CPU = torch.device("cpu")

TOY = {
    "name": "toy_gather_h8", "op_type": "toy", "description": "y[i] = x[idx[i]] * 2",
    "axes": {"n": {"type": "var"}, "m": {"type": "var"}, "h": {"type": "const", "value": 8},
             "len_off": {"type": "var"}},
    "constraints": ["0 <= idx", "idx < n", "len_off == m + 1", "m == off[-1].item()"],
    "inputs": {"x": {"shape": ["n", "h"], "dtype": "bfloat16"}, "idx": {"shape": ["m"], "dtype": "int32"},
               "off": {"shape": ["len_off"], "dtype": "int64"}, "w8": {"shape": ["h"], "dtype": "float8_e4m3fn"},
               "flag": {"shape": ["h"], "dtype": "bool"}, "small": {"shape": ["h"], "dtype": "int8"},
               "scale": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["m", "h"], "dtype": "bfloat16"}},
    "reference": "import torch\n\n\ndef run(x, idx, off, w8, flag, small, scale):\n"
                 "    assert off[0] == 0\n    return (x[idx.long()].float() * 2).to(torch.bfloat16)\n",
}


def _toy(tmp_path, **changes):
    spec = {**TOY, **changes}
    path = tmp_path / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return path


def _inputs(b, axes, seed=1):
    w = Workload(uuid="w", axes=axes, inputs={})
    return b.make_inputs(b.definition, w, make_generator(seed, CPU), CPU)


def test_a_definition_file_is_a_generic_definition(tmp_path):
    b = generic.from_file(_toy(tmp_path))
    assert b.origin == "file" and b.locator.startswith("file:") and "#sha256=" in b.locator
    assert b.checker == "elementwise" and b.roofline is None and not b.has_quick
    assert (b.tolerance.atol, b.tolerance.rtol, b.tolerance.required_matched_ratio) == (1e-2, 1e-2, 1.0)
    assert b.quick_variant() is b and b.hidden_workloads("salt") == []
    again = definitions.resolve(b.locator)                 # what the worker does
    assert again.definition == b.definition and again.origin == "file"
    assert again.reference._run is None                    # resolving compiles no reference


def test_the_reference_runs_only_where_it_is_called(tmp_path):
    b = generic.from_file(_toy(tmp_path))
    inputs = _inputs(b, {"n": 5, "m": 3, "len_off": 4})
    assert b.reference._run is None
    y = b.reference(**inputs)
    assert b.reference._run is not None
    assert torch.equal(y, (inputs["x"][inputs["idx"].long()].float() * 2).to(torch.bfloat16))


def test_inputs_follow_the_upstream_random_convention_and_the_constraints(tmp_path):
    b = generic.from_file(_toy(tmp_path))
    x = _inputs(b, {"n": 50, "m": 400, "len_off": 401})
    assert x["x"].dtype == torch.bfloat16 and x["x"].float().std() > 0.5               # randn
    w8 = x["w8"].float()
    assert x["w8"].dtype == torch.float8_e4m3fn and w8.abs().max() <= 2.0              # clamped to +-2, cast
    assert x["flag"].dtype == torch.bool
    assert x["small"].dtype == torch.int8 and int(x["small"].int().min()) >= -128                       # int8: [-128, 128)
    assert int(x["idx"].min()) >= 0 and int(x["idx"].max()) < 50                        # 0 <= idx < n
    off = x["off"]
    assert int(off[0]) == 0 and int(off[-1]) == 400 and bool((off[1:] >= off[:-1]).all())   # offsets ending at m
    assert isinstance(x["scale"], float)                                               # a random scalar: one draw
    assert generic.int_rules(b.definition)["off"].total == "m"
    again = _inputs(b, {"n": 50, "m": 400, "len_off": 401})
    assert all(torch.equal(again[k], x[k]) for k in ("x", "idx", "off"))               # seeded: deterministic


def test_unbounded_integers_take_upstreams_range(tmp_path):
    b = generic.from_file(_toy(tmp_path, constraints=["len_off == m + 1", "m == off[-1].item()"]))
    idx = _inputs(b, {"n": 5, "m": 4000, "len_off": 4001})["idx"]
    assert int(idx.min()) >= -1024 and int(idx.max()) < 1024 and int(idx.min()) < 0


def test_a_constraint_the_inputs_break_is_a_one_line_workload_error(tmp_path):
    b = generic.from_file(_toy(tmp_path))
    with pytest.raises(WorkloadInputError) as exc:
        _inputs(b, {"n": 5, "m": 3, "len_off": 7})                # len_off == m + 1 does not hold
    assert "len_off == m + 1" in str(exc.value) and "\n" not in str(exc.value)


def test_a_failing_reference_names_the_file_and_its_line(tmp_path):
    path = _toy(tmp_path, reference="import torch\n\n\ndef run(x, idx, off, w8, flag, small, scale):\n"
                                    "    return x[idx.long() + 1000]\n")
    b = generic.from_file(path)
    with pytest.raises(ReferenceFailed) as exc:
        b.reference(**_inputs(b, {"n": 5, "m": 3, "len_off": 4}))
    message = str(exc.value)
    assert message.startswith(f"{path.name} (reference), line 5: IndexError") and "\n" not in message


def test_a_changed_definition_file_is_refused_by_its_locator(tmp_path):
    path = _toy(tmp_path)
    b = generic.from_file(path)
    path.write_text(path.read_text().replace("* 2", "* 0"))
    with pytest.raises(definitions.UnknownDefinition, match="changed since the run began"):
        definitions.resolve(b.locator)


def test_bad_definition_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"name\": ")
    with pytest.raises(DataFileError, match="bad.json: malformed JSON"):
        generic.load_file(bad)


def test_upstream_definitions_load_and_the_builtin_names_keep_their_rules():
    fib = require_fib()
    for path in sorted(fib.glob("*.json")):
        if path.name in ("baselines.json", "contest_workload_axes.json"):
            continue
        definition = generic.load_file(path)
        b = definitions.adopt(definition, source=path)
        builtin = definitions.get_or_none(definition.name)
        if builtin is not None:                       # MoE, indexer, attention ps64: our checker and synthesis
            assert b is builtin and b.origin == "builtin"
        else:
            assert b.origin == "file" and b.checker == "elementwise"
            expected = 0.95 if definition.op_type == "moe" else 1.0
            assert b.tolerance.required_matched_ratio == expected
    gdn = generic.from_file(fib / "gdn_prefill_qk4_v8_d128_k_last.json")
    x = _inputs(gdn, {"total_seq_len": 9, "num_seqs": 3, "len_cu_seqlens": 4})
    assert int(x["cu_seqlens"][0]) == 0 and int(x["cu_seqlens"][-1]) == 9
    out, state = gdn.reference(**x)
    assert out.shape == (9, 8, 128) and state.shape == (3, 8, 128, 128)
    mla = generic.from_file(fib / "mla_paged_decode_h16_ckv512_kpe64_ps1.json")
    y = _inputs(mla, {"batch_size": 2, "num_pages": 2048, "len_indptr": 3, "num_kv_indices": 40})
    assert int(y["kv_indptr"][-1]) == 40


def test_a_builtin_name_with_another_spec_is_refused(tmp_path):
    fib = require_fib()
    spec = json.loads((fib / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.json").read_text())
    spec["axes"]["hidden_size"]["value"] = 1024
    path = tmp_path / "moe.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(definitions.UnknownDefinition, match="has a built-in's name but its axes differ"):
        definitions.adopt(generic.load_file(path), source=path)
