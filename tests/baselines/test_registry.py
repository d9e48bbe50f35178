"""Baseline registry, manifests, availability and call signatures (CPU)."""

import importlib
import inspect
import json

import pytest
import torch

import kernelwright.baselines as baselines
from kernelwright.baselines import KINDS, all_baselines, get_baseline
from kernelwright.definitions import all_builtins, get
from kernelwright.solutions import load_solution_folder

ENTRIES = all_baselines()
IDS = [e.key for e in ENTRIES]


CONTEST = ["moe", "indexer", "attention"]


def test_every_contest_definition_has_a_complete_baseline():
    for builtin in (get(name) for name in CONTEST):
        found = all_baselines(builtin.name)
        assert any(e.kind == "complete" for e in found), builtin.name
        assert all_baselines(builtin.short) == found  # alias resolves
        assert all_baselines(builtin.name + "__quick") == []


def test_moe_has_a_lower_bound():
    kinds = {e.kind for e in all_baselines("moe")}
    assert kinds == {"complete", "lower_bound"}


def test_get_baseline_unknown_lists_known():
    with pytest.raises(KeyError, match="known:"):
        get_baseline("nope")


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_manifest_and_solution(entry):
    meta = json.loads((entry.folder / entry.manifest_file).read_text())
    assert meta["language"] == "python"
    assert meta["author"] and meta["dependencies"]
    assert entry.kind in KINDS and entry.label
    sol = load_solution_folder(entry.folder, entry.manifest_file)
    assert sol == entry.solution
    assert sol.definition in {b.name for b in all_builtins()}
    paths = {s.path for s in sol.sources}
    assert sol.spec.entry_file in paths
    if entry.prepare_entry:
        assert entry.prepare_entry.split("::")[0] in paths
        assert entry.prepare_entry == f"{sol.spec.entry_file}::{entry.prepare_symbol}"  # in the entry file: the gate looks it up there
    assert entry.role == ("lower_bound" if entry.kind == "lower_bound" else "baseline")
    # sources never import kernelwright (they are shipped as self-contained solutions)
    for src in sol.sources:
        assert "import kernelwright" not in src.content and "from kernelwright" not in src.content


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_availability_is_one_line_reason_here(entry):
    reason = entry.availability()
    if torch.cuda.is_available():
        pytest.skip("availability on a GPU machine depends on the installed packages")
    assert isinstance(reason, str) and reason
    assert "\n" not in reason and len(reason) < 200


def test_availability_names_missing_packages(monkeypatch):
    monkeypatch.setattr(baselines, "_has_deep_gemm", lambda: False)
    monkeypatch.setattr(baselines, "_top_level", lambda name: False)
    reason = get_baseline("indexer_deepgemm_flashinfer").availability()
    assert reason.startswith("DeepGEMM not importable")
    monkeypatch.setattr(baselines, "_has_deep_gemm", lambda: True)
    monkeypatch.setattr(baselines, "_find_nvcc", lambda: "/usr/bin/nvcc")
    reason = get_baseline("indexer_deepgemm_flashinfer").availability()
    assert reason.startswith("flashinfer and tvm_ffi not importable")
    monkeypatch.setattr(baselines, "_top_level", lambda name: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert get_baseline("indexer_deepgemm_flashinfer").availability() == "no CUDA device"


def test_availability_rejects_wrong_arch(monkeypatch):
    monkeypatch.setattr(baselines, "_top_level", lambda name: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA B200")
    reason = get_baseline("attention_flashinfer_mla_fa3").availability()
    assert reason == "needs a Hopper GPU (sm_90), found sm_100 (NVIDIA B200)"


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_signatures_match_definition(entry):
    builtin = get(entry.definition)
    inputs = builtin.definition.input_names
    outputs = builtin.definition.output_names if entry.destination_passing_style else []
    loaded = entry.load()  # imports only torch/triton at module level
    params = inspect.signature(loaded.run).parameters
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == inputs + outputs
    if entry.prepare_entry:
        assert "state" in params and params["state"].kind is params["state"].KEYWORD_ONLY
        assert list(inspect.signature(loaded.prepare).parameters) == inputs
    else:
        assert loaded.prepare is None and "state" not in params


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_module_import_does_not_need_the_library(entry):
    """Importing a baseline module must not import deep_gemm/flashinfer/flashmla (lazy)."""
    mod = importlib.import_module(f"kernelwright.baselines.{entry.folder.name}.kernel")
    assert mod is not None


def test_selfcheck_without_cuda_reports_availability(capsys):
    if torch.cuda.is_available():
        pytest.skip("CPU-only behaviour")
    from kernelwright.baselines import selfcheck

    assert selfcheck.main([]) == 0
    out = capsys.readouterr().out
    assert "no CUDA device" in out
    for key in IDS:
        assert key in out


def test_selfcheck_comparisons():
    from kernelwright.baselines import selfcheck

    ref = torch.tensor([1.0, 2.0, float("-inf"), 100.0])
    out = torch.tensor([1.005, 2.5, float("-inf"), 100.5])
    rec = selfcheck.elementwise(out, ref, atol=1e-2, rtol=1e-2)
    assert rec["matched_ratio"] == 0.75 and rec["nonfinite_mismatch"] == 0
    rec = selfcheck.elementwise(torch.tensor([float("nan")]), torch.tensor([1.0]), 1.0, 1.0)
    assert rec["matched_ratio"] == 0.0
    ratio = selfcheck.lse_ratio(torch.tensor([2.0, 4.0]) * 0.6931, torch.tensor([2.0, 4.0]))
    assert abs(ratio - 0.6931) < 1e-4


def test_selfcheck_topk_checker():
    from kernelwright.baselines import selfcheck

    builtin = get("indexer")
    wl = [w for w in builtin.public_workloads() if w.axes["max_num_pages"] == 3][0]
    inputs = builtin.make_inputs(builtin.definition, wl, torch.Generator().manual_seed(0), torch.device("cpu"))
    args = [inputs[n] for n in builtin.definition.input_names]
    ref = builtin.reference(*args)
    good = ref.clone()
    for b in range(good.shape[0]):  # any order of the same ids passes
        n = int((good[b] >= 0).sum())
        good[b, :n] = good[b, :n].flip(0)
    assert selfcheck.check_topk(inputs, good, ref, 1e-2, 1e-2)["matched_ratio"] == 1.0
    bad = ref.clone()
    bad[0, 0] = -1
    rec = selfcheck.check_topk(inputs, bad, ref, 1e-2, 1e-2)
    assert rec["matched_ratio"] < 1.0 and "row 0" in rec["note"]


@pytest.mark.gpu
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_baseline_on_gpu(entry):
    """The full baseline against the reference on one small contest workload (GPU only)."""
    reason = entry.availability()
    if reason:
        pytest.skip(reason)
    from kernelwright.baselines import selfcheck

    builtin = get(entry.definition)
    wl = selfcheck.pick_workloads(builtin, all_public=False)[0]
    inputs = builtin.make_inputs(builtin.definition, wl, torch.Generator("cuda").manual_seed(0),
                                 torch.device("cuda"))
    refs = selfcheck.as_tuple(builtin.reference(*[inputs[n] for n in builtin.definition.input_names]))

    class Args:
        iters, warmup, verbose = 3, 1, False

    rec = selfcheck.run_entry(entry, builtin, wl, inputs, refs, Args())
    assert rec["status"] == "ok", rec.get("error") or rec.get("check")


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_packed_solution_imports_like_the_gate(entry, tmp_path, monkeypatch):
    """The gate's worker writes the sources into a fresh package and imports the entry file
    from it, then looks ``prepare`` up on that module by name."""
    package = f"kwsol_test_{entry.key}"
    entry.solution.write_sources(tmp_path / package)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(f"{package}.{entry.solution.spec.entry_file[:-3]}")
    assert callable(getattr(module, entry.solution.spec.entry_symbol))
    if entry.prepare_symbol:
        assert callable(getattr(module, entry.prepare_symbol))


def test_two_manifests_of_one_folder_pack_the_same_sources():
    """A folder's manifest.SUFFIX.json is the baseline <folder>_SUFFIX: same kernel.py, its own entry."""
    for key, other in (("indexer_deepgemm_flashinfer", "indexer_deepgemm_flashinfer_premeta"),
                       ("attention_flashinfer_mla_fa3", "attention_flashinfer_mla_fa3_preplanned"),
                       ("moe_deepgemm_triton", "moe_deepgemm_triton_gemms_only")):
        a, b = get_baseline(key), get_baseline(other)
        assert a.folder == b.folder and a.solution.sources == b.solution.sources
        assert a.solution.name != b.solution.name and a.solution.spec.entry_point != b.solution.spec.entry_point
        assert a.load().module is b.load().module
