"""The Triton DSA sparse-attention solution against our PyTorch reference.

CPU runs go through the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET=1 without
CUDA) at the reduced ``attention__quick`` sizes (topk 64), plus custom topk values (64-256)
where the split/combine, the pipelined loop and both tile orientations are forced through
explicit configs, and one case at the full definition sizes.  Every output goes through the
gate's checker.  The ``gpu`` tests run the contest and serving-envelope sizes on CUDA.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernelwright
from kernelwright.definitions import get
from kernelwright.gate.checkers import check_outputs
from kernelwright.inputs import make_generator, synth_request_sparse_indices
from kernelwright.solutions import load_solution_folder
from kernelwright.solutions.candidates.dsa_attention_triton_v3 import kernel as K
from kernelwright.trace import Workload

FOLDER = Path(kernelwright.__file__).parent / "solutions" / "candidates" / "dsa_attention_triton_v3"


# ---------------------------------------------------------------------------- helpers

def _workload(b, tokens: int, pages: int) -> Workload:
    return Workload(uuid=f"t{tokens}-p{pages}", axes={"num_tokens": tokens, "num_pages": pages},
                    inputs=dict(b.public_workloads()[0].inputs))


def _inputs(b, w, seed: int, device: str = "cpu", definition=None):
    return b.make_inputs(definition or b.definition, w, make_generator(seed, device),
                         torch.device(device))


def _with_topk(b, topk: int):
    return b.definition.with_const_axes({"topk": topk}, f"attention__topk{topk}")


def _gate_check(b, out, lse, inputs) -> None:
    """The gate's own checker (kind "attention", the definition's tolerance) against the
    definition's reference."""
    ref_out, ref_lse = b.reference(**inputs)
    res = check_outputs("attention", {"output": out, "lse": lse},
                        {"output": ref_out, "lse": ref_lse}, b.tolerance, inputs)
    assert res.passed, f"{res.reason}: {res.detail} (max abs {res.max_absolute_error:.4g})"


def _run(inputs, config=None):
    """Call the solution on NaN-poisoned outputs: ``run`` (the shape dispatch), or ``_launch``
    with an explicit config.  Returns (output, lse)."""
    T, H, D = inputs["q_nope"].shape
    dev = inputs["q_nope"].device
    out = torch.full((T, H, D), float("nan"), dtype=torch.bfloat16, device=dev)
    lse = torch.full((T, H), float("nan"), dtype=torch.float32, device=dev)
    if config is None:
        K.run(**inputs, output=out, lse=lse)
    else:
        K._launch(**inputs, output=out, lse=lse, config=config)
    return out, lse


def _run_and_check(b, inputs, config=None) -> None:
    out, lse = _run(inputs, config)
    _gate_check(b, out, lse, inputs)


def _one_request_inputs(b, tokens, context, pages, seed, device="cpu", definition=None):
    """Inputs whose rows are the last ``tokens`` positions of one request (overlapping
    selections: the serving envelope's ``synth_request_sparse_indices``)."""
    defn = definition or b.definition
    inputs = _inputs(b, _workload(b, tokens, pages), seed, device, defn)
    topk = inputs["sparse_indices"].shape[1]
    inputs["sparse_indices"] = synth_request_sparse_indices(
        tokens, topk, context, pages, inputs["ckv_cache"].shape[1],
        make_generator(seed + 1, device), device)
    return inputs


# Explicit configs: (block_n, tiles_per_split, num_warps, num_stages, swap_ab).  Both tile
# orientations, one and several tiles per program (the pipelined loop), one split (the fused
# bf16 epilogue) and several (the combine).
DECODE_SPLIT = K.Config(16, 2, 4, 2, False)
DECODE_ONE = K.Config(16, 16, 4, 4, False)
TILED_SPLIT = K.Config(64, 1, 4, 2, True)
TILED_PIPELINED = K.Config(64, 2, 4, 2, True)
TILED_ONE = K.Config(64, 4, 4, 2, True)
SORTED_SPLIT = K.Config(64, 1, 4, 2, True, sort_indices=True)
SORTED_ONE = K.Config(64, 4, 4, 2, True, sort_indices=True)


@pytest.fixture(scope="module")
def quick():
    return get("attention__quick")


# ---------------------------------------------------------------------------- packaging

def test_manifest_and_sources():
    sol = load_solution_folder(FOLDER)
    assert sol.name == "kernelwright_dsa_attention_triton_v3"
    assert sol.definition == "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
    assert sol.spec.entry_point == "kernel.py::run"
    assert sol.spec.destination_passing_style
    for src in sol.sources:
        assert "kernelwright" not in src.content.replace("kernelwright_dsa", ""), src.path
        for banned in (".item()", "nonzero(", ".cpu()", ".tolist()"):
            assert banned not in src.content, f"{src.path}: host sync {banned}"


# ---------------------------------------------------------------------------- shape dispatch

def test_dispatch_table():
    """The contest topk on 132 SMs: the tile grows 16 -> 32 -> 64 slots with T (64: swapped),
    about one program per SM, the tiles cover every slot exactly once, ids sorted from T = 32,
    one split (no combine) from T = 67."""
    cfg = K._choose_config
    assert cfg(1, 2048) == K.Config(16, 1, 4, 2, False)            # 128 splits of one tile
    assert cfg(2, 2048) == K.Config(32, 1, 4, 2, False)            # 64 splits of one tile
    assert cfg(3, 2048) == K.Config(64, 1, 4, 2, True)             # 32 splits, swapped
    assert K.num_splits_of(cfg(1, 2048), 2048) == 128
    assert K.num_splits_of(cfg(2, 2048), 2048) == 64
    assert K.num_splits_of(cfg(8, 2048), 2048) == 16
    assert K.num_splits_of(cfg(16, 2048), 2048) == 8
    assert K.num_splits_of(cfg(64, 2048), 2048) == 2
    assert K.num_splits_of(cfg(66, 2048), 2048) == 2
    assert K.num_splits_of(cfg(67, 2048), 2048) == 1
    assert cfg(31, 2048).sort_indices is False and cfg(32, 2048).sort_indices is True
    for tokens in range(1, 300):
        for topk in (64, 200, 2048, 4096):
            c = cfg(tokens, topk)
            splits = K.num_splits_of(c, topk)
            span = c.block_n * c.tiles_per_split
            assert (splits - 1) * span < topk <= splits * span, (tokens, topk, c)
            assert splits <= K.MAX_SPLITS
            assert c.block_n in (16, 32, 64)
            assert c.swap_ab == (c.block_n == K.SWAPPED_BLOCK_N)
            assert c.sort_indices == (c.swap_ab and tokens >= K.SORTED_MIN_TOKENS)
            assert c.swap_ab or c.tiles_per_split == 1 or topk < 2048
            if topk == 2048:  # one wave, and one tile fewer per split would overfill it
                tiles = math.ceil(topk / c.block_n)
                assert tokens * splits <= 132 or splits == 1, (tokens, c)
                assert c.tiles_per_split == 1 or \
                    tokens * math.ceil(tiles / (c.tiles_per_split - 1)) > 132, (tokens, c)


def test_combine_config_table():
    assert K._combine_config(128, 512, False) == (128, 16)
    assert K._combine_config(16, 512, False) == (16, 128)
    assert K._combine_config(2, 512, False) == (2, 512)
    assert K._combine_config(43, 512, False) == (64, 32)


# ---------------------------------------------------------------------------- interpreter

@pytest.mark.parametrize("seed", [0, 1])
def test_quick_public_workloads(quick, seed):
    for w in quick.public_workloads():
        _run_and_check(quick, _inputs(quick, w, seed))


@pytest.mark.parametrize("tokens,pages,seed", [(1, 3, 7), (2, 9, 3), (5, 12, 11), (8, 6, 5)])
def test_token_counts(quick, tokens, pages, seed):
    _run_and_check(quick, _inputs(quick, _workload(quick, tokens, pages), seed))


@pytest.mark.parametrize("tokens,block_n,splits", [(8, 16, 16), (9, 32, 8), (15, 32, 8),
                                                   (16, 32, 8), (17, 64, 4)])
def test_dispatch_boundaries(quick, tokens, block_n, splits):
    """Through ``run`` at topk 256 on 132 SMs, where the tile changes between T = 8 and 9
    (16 -> 32 slots) and between 16 and 17 (32 slots -> swapped 64); every T here splits and
    combines.  Rows of one request with -1 holes."""
    defn = _with_topk(quick, 256)
    cfg = K._choose_config(tokens, 256)
    assert (cfg.block_n, K.num_splits_of(cfg, 256)) == (block_n, splits)
    inputs = _one_request_inputs(quick, tokens, 300, 12, seed=tokens, definition=defn)
    inputs["sparse_indices"][tokens // 2, 3::5] = -1
    _run_and_check(quick, inputs)


@pytest.mark.parametrize("tokens,splits,sort", [(4, 2, False), (5, 1, False), (31, 1, False),
                                                (32, 1, True)])
def test_dispatch_boundaries_few_sms(quick, monkeypatch, tokens, splits, sort):
    """On a GPU of 8 SMs (topk 256, swapped tiles): one split, so no combine and the bf16
    output written by the partial kernel, from T = 5; the id sort from T = 32."""
    monkeypatch.setattr(K, "DEFAULT_NUM_SMS", 8)
    defn = _with_topk(quick, 256)
    cfg = K._choose_config(tokens, 256, K._num_sms(None))
    assert (cfg.swap_ab, K.num_splits_of(cfg, 256), cfg.sort_indices) == (True, splits, sort)
    inputs = _one_request_inputs(quick, tokens, 400, 12, seed=tokens, definition=defn)
    inputs["sparse_indices"][0] = -1
    _run_and_check(quick, inputs)


@pytest.mark.parametrize("config", [DECODE_SPLIT, DECODE_ONE, TILED_SPLIT, TILED_PIPELINED, TILED_ONE,
                                    SORTED_SPLIT],
                         ids=["decode-split", "decode-one", "tiled-split", "tiled-pipelined", "tiled-one",
                              "sorted-split"])
def test_configs_vs_reference(quick, config):
    """Each kernel path at topk 256 on contest-style rows (own pages each) with -1 runs."""
    defn = _with_topk(quick, 256)
    inputs = _inputs(quick, _workload(quick, 3, 16), seed=31, definition=defn)
    inputs["sparse_indices"][1, 5:70] = -1
    _run_and_check(quick, inputs, config)


@pytest.mark.parametrize("topk,config", [
    (200, K.Config(16, 3, 4, 3, False)),  # 5 splits, the last one partly past topk
    (200, K.Config(64, 2, 4, 2, True)),   # 2 splits, the second half past topk
    (200, K.Config(64, 4, 4, 2, True)),   # one split longer than topk, fused epilogue
    (48, K.Config(16, 1, 4, 2, False)),   # topk not a power of two
])
def test_ragged_topk(quick, topk, config):
    inputs = _inputs(quick, _workload(quick, 2, 16), seed=topk, definition=_with_topk(quick, topk))
    _run_and_check(quick, inputs, config)


@pytest.mark.parametrize("config", [None, DECODE_ONE, TILED_SPLIT, TILED_ONE, SORTED_ONE],
                         ids=["dispatch", "decode-one", "tiled-split", "tiled-one", "sorted-one"])
def test_padding_anywhere_and_empty_rows(quick, config):
    """-1 at random positions, a row entirely -1, a row with one valid id, a row whose first
    half is all padding, a row whose only valid ids sit in its last tile."""
    defn = _with_topk(quick, 256) if config is not None else None
    inputs = _inputs(quick, _workload(quick, 6, 8), seed=21, definition=defn)
    idx = inputs["sparse_indices"].clone()
    topk = idx.shape[1]
    gen = make_generator(99, "cpu")
    holes = torch.rand(idx.shape, generator=gen) < 0.4
    idx[holes] = -1
    idx[1] = -1
    idx[2, :] = -1
    idx[2, topk // 2] = 17
    idx[3, : topk // 2] = -1
    idx[4, : topk - 3] = -1
    inputs["sparse_indices"] = idx
    _run_and_check(quick, inputs, config)
    _, ref_lse = quick.reference(**inputs)
    assert torch.isinf(ref_lse[1]).all()  # and the reference agrees that row 1 is empty


@pytest.mark.parametrize("config", [None, DECODE_SPLIT, TILED_ONE, SORTED_SPLIT],
                         ids=["dispatch", "split", "one", "sorted"])
def test_all_rows_empty(quick, config):
    defn = _with_topk(quick, 256) if config is not None else None
    inputs = _inputs(quick, _workload(quick, 3, 4), seed=4, definition=defn)
    inputs["sparse_indices"] = torch.full_like(inputs["sparse_indices"], -1)
    out, lse = _run(inputs, config)
    assert (out == 0).all()
    assert torch.isneginf(lse).all()
    _gate_check(quick, out, lse, inputs)


@pytest.mark.parametrize("config", [None, DECODE_SPLIT, TILED_PIPELINED, SORTED_SPLIT],
                         ids=["dispatch", "decode", "tiled", "sorted"])
def test_rows_of_one_request(quick, config):
    """Rows sharing most of their tokens (the last 10 positions of one 160-token request,
    topk 128: each row picks 128 of its first 151-160 tokens), the first row set to all -1."""
    defn = _with_topk(quick, 128)
    inputs = _one_request_inputs(quick, 10, 160, 6, seed=3, definition=defn)
    idx = inputs["sparse_indices"]
    shared = (idx[0][:, None] == idx[1][None, :]).sum()
    assert shared >= 90  # the rows really overlap
    inputs["sparse_indices"] = torch.cat([torch.full_like(idx[:1], -1), idx[1:]])
    _run_and_check(quick, inputs, config)


def test_sort_indices_kernel():
    """Each row ascending, -1 padding (anywhere in the input) last, duplicates kept; a
    non-contiguous input row stride."""
    gen = make_generator(3, "cpu")
    base = torch.randint(-1, 500, (4, 2 * 200), generator=gen, dtype=torch.int32)
    idx = base[:, ::2]  # strides (400, 2)
    idx[1, :] = -1
    idx[2, 7] = idx[2, 9]
    out = torch.empty((4, 200), dtype=torch.int32)
    K._dsa_sort_indices_kernel[(4,)](idx, out, 200, *idx.stride(), TOPK_BLOCK=256, INTERPRET=True)
    key = torch.where(idx < 0, torch.iinfo(torch.int32).max, idx).sort(dim=1).values
    assert torch.equal(out, torch.where(key == torch.iinfo(torch.int32).max, -1, key))


def test_repeated_pages_and_ids(quick):
    """All rows draw from the same two pages (shared pages across rows, many ids per page),
    one row repeats ids."""
    inputs = _inputs(quick, _workload(quick, 4, 10), seed=8)
    T, topk = inputs["sparse_indices"].shape
    ps = inputs["ckv_cache"].shape[1]
    gen = make_generator(5, "cpu")
    pages = torch.tensor([3, 7])
    slots = torch.randint(0, ps, (T, topk), generator=gen)
    which = torch.randint(0, 2, (T, topk), generator=gen)
    idx = (pages[which] * ps + slots).to(torch.int32)
    idx[2, ::3] = -1
    idx[3, topk // 2:] = idx[3, : topk - topk // 2]  # duplicated ids within a row
    inputs["sparse_indices"] = idx
    _run_and_check(quick, inputs)
    _run_and_check(quick, inputs, SORTED_SPLIT)  # sorting keeps the duplicates


@pytest.mark.parametrize("mutation", ["scale", "combine_half", "skip_split"])
def test_checks_catch_a_broken_kernel(quick, monkeypatch, mutation):
    """The checks above can fail: a wrong logit scale, a combine that merges only half of the
    splits, and a schedule that leaves the last split out are all rejected by the gate's
    checker."""
    defn = _with_topk(quick, 256)
    inputs = _inputs(quick, _workload(quick, 2, 16), seed=12, definition=defn)
    config = DECODE_SPLIT
    if mutation == "scale":
        monkeypatch.setattr(K, "LOG2E", 1.0)
    elif mutation == "combine_half":  # the combine reads only the first half of the splits
        monkeypatch.setattr(K, "_combine_config", lambda n, d, i: (max(2, K.triton.next_power_of_2(n)) // 2, d))
    else:
        monkeypatch.setattr(K, "num_splits_of", lambda c, topk: K.triton.cdiv(
            K.triton.cdiv(topk, c.block_n), c.tiles_per_split) - 1)
    out, lse = _run(inputs, config)
    ref_out, ref_lse = quick.reference(**inputs)
    res = check_outputs("attention", {"output": out, "lse": lse},
                        {"output": ref_out, "lse": ref_lse}, quick.tolerance, inputs)
    assert not res.passed


def test_full_definition_sizes_t1():
    full = get("attention")
    inputs = _inputs(full, _workload(full, 1, 40), seed=2)
    assert inputs["sparse_indices"].shape == (1, 2048)
    assert inputs["q_nope"].shape == (1, 16, 512)
    _run_and_check(full, inputs)


def test_no_state_between_calls(quick):
    w = _workload(quick, 2, 6)
    for seed in (30, 31):  # same shapes, same destination buffers, different values
        inputs = _inputs(quick, w, seed)
        _run_and_check(quick, inputs)


# ---------------------------------------------------------------------------- sm_90 compile

_AOT_SCRIPT = r"""
import json, os, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernelwright.solutions.candidates.dsa_attention_triton_v3 import kernel as K

TARGET = GPUTarget("cuda", 90, 32)
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
# What the JIT sees at the contest sizes: 16-B aligned pointers; every int argument divisible
# by 16 except these; unit strides specialised to the constant 1.
NOT_DIV = {"scale_log2", "num_splits", "num_tokens"}
UNIT = {"stride_qn_d", "stride_qp_d", "stride_ckv_d", "stride_kpe_d", "stride_idx_k",
        "stride_o_d", "stride_lse_h"}

def build(fn, consts, warps, stages, ptrs):
    consts = dict(consts, **{n: 1 for n in fn.arg_names if n in UNIT})
    sig, attrs = {}, {}
    for i, n in enumerate(fn.arg_names):
        if n in consts:
            sig[n] = "constexpr"
            continue
        sig[n] = ptrs.get(n, "*fp32") if n.endswith("_ptr") else ("fp32" if n == "scale_log2" else "i32")
        if n not in NOT_DIV and sig[n] != "fp32":
            attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn, sig, consts, attrs=attrs), target=TARGET,
                       options=dict(num_warps=warps, num_stages=stages))
    ptx = k.asm["ptx"]
    res = {"vec16": len(re.findall(r"ld\.global(?:\.[a-z]+)*\.v4\.b32|cp\.async\.cg\.shared\.global[^;]*0x10", ptx)),
           "b16_loads": len(re.findall(r"ld\.global(?:\.[a-z]+)*\.b16", ptx)),
           "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
           "mma_sync": len(re.findall(r"mma\.sync", ptx)),
           "griddep": len(re.findall(r"griddepcontrol", ptx)),
           "smem": k.metadata.shared}
    if os.path.exists(CUOBJDUMP):
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(k.asm["cubin"])
        out = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
        if m:
            res.update(regs=int(m.group(1)), stack=int(m.group(2)), local=int(m.group(4)))
    return res

results = {}
for tokens in (1, 2, 3, 8, 15, 16, 32, 64, 128):
    cfg = K._choose_config(tokens, 2048)
    splits = K.num_splits_of(cfg, 2048)
    final = splits == 1
    consts = dict(PAGE_SIZE=64, BLOCK_H=16, D_CKV=512, D_KPE=64, BLOCK_N=cfg.block_n,
                  TILES_PER_SPLIT=cfg.tiles_per_split, NUM_STAGES=cfg.num_stages,
                  SWAP_AB=cfg.swap_ab, FINAL=final, WAIT_PRIOR=cfg.sort_indices, INTERPRET=False)
    ptrs = {"q_nope_ptr": "*bf16", "q_pe_ptr": "*bf16", "ckv_ptr": "*bf16", "kpe_ptr": "*bf16",
            "idx_ptr": "*i32", "o_ptr": "*bf16" if final else "*fp32"}
    res = build(K._dsa_partial_kernel, consts, cfg.num_warps, cfg.num_stages, ptrs)
    results[f"partial T={tokens} {tuple(cfg)} splits={splits}"] = dict(res, swap_ab=cfg.swap_ab, sort=cfg.sort_indices)
    if not final:
        sb, block_d = K._combine_config(splits, 512, False)
        consts = dict(D_CKV=512, BLOCK_D=block_d, SPLIT_BLOCK=sb, INTERPRET=False)
        results[f"combine T={tokens} splits={splits}"] = build(K._dsa_combine_kernel, consts, 4, 1,
                                                                {"out_ptr": "*bf16"})
results["sort"] = build(K._dsa_sort_indices_kernel, dict(TOPK_BLOCK=2048, INTERPRET=False), 8, 1,
                        {"idx_ptr": "*i32", "sorted_ptr": "*i32"})
print(json.dumps(results))
"""


def test_compiles_for_sm90():
    """AOT-compile both kernels for sm_90 with Triton's bundled ptxas (no GPU needed), at the
    dispatch's configs from T = 1 to 128: no compile error, no register spill, 16-byte row
    gathers (no scalar 2-byte loads), wgmma on the swapped tiles and mma.sync on the decode
    tiles, the PDL instructions present, shared memory within the H200's 227 KB."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _AOT_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert any(name.startswith("combine") for name in results)
    for name, res in results.items():
        assert res.get("local", 0) == 0 and res.get("stack", 0) == 0, (name, res)
        assert res["b16_loads"] == 0, (name, res)
        assert res["griddep"] >= 1, (name, res)
        if name.startswith("partial"):
            assert res["griddep"] == 1 + res["sort"], (name, res)  # + the wait behind the sort
            assert res["vec16"] >= 16, (name, res)
            assert res["smem"] <= 227 * 1024, (name, res)
            if res["swap_ab"]:
                assert res["wgmma"] > 0 and res["mma_sync"] == 0, (name, res)
            else:
                assert res["mma_sync"] > 0 and res["wgmma"] == 0, (name, res)


# ---------------------------------------------------------------------------- GPU (H200)

@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 2, 3, 8, 9, 15, 16, 17, 40, 128])
def test_gpu_contest_style_sizes(tokens):
    """Contest-style rows (own pages each) across the dispatch, then -1 holes and an empty
    row."""
    full = get("attention")
    inputs = _inputs(full, _workload(full, tokens, 8462), seed=tokens, device="cuda")
    _run_and_check(full, inputs)
    inputs["sparse_indices"][0, ::2] = -1
    if tokens > 1:
        inputs["sparse_indices"][1] = -1
    _run_and_check(full, inputs)
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("tokens,context", [(1, 4096), (4, 32768), (8, 1536), (16, 4096),
                                            (32, 32768), (64, 131072), (128, 4096),
                                            (128, 131072)])
def test_gpu_one_request(tokens, context):
    """Serving-envelope rows: the last T positions of one request, overlapping selections;
    context 1536 leaves every row short of topk (-1 padded)."""
    full = get("attention")
    inputs = _one_request_inputs(full, tokens, context, 8462, seed=tokens + context, device="cuda")
    _run_and_check(full, inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [DECODE_SPLIT, DECODE_ONE, TILED_SPLIT, TILED_PIPELINED, TILED_ONE,
                                    SORTED_SPLIT, K.Config(64, 32, 4, 2, True, True),
                                    K.Config(64, 8, 8, 2, True), K.Config(32, 4, 4, 3, False)],
                         ids=["decode-split", "decode-one", "tiled-split", "tiled-pipelined",
                              "tiled-one", "sorted-split", "sorted-one", "tiled-8warps", "decode-32"])
def test_gpu_configs(config):
    """Every kernel path at the full sizes (T = 6, contest-style rows with -1 holes)."""
    full = get("attention")
    inputs = _inputs(full, _workload(full, 6, 8462), seed=77, device="cuda")
    inputs["sparse_indices"][2, 100:900] = -1
    inputs["sparse_indices"][4] = -1
    _run_and_check(full, inputs, config)


@pytest.mark.gpu
@pytest.mark.parametrize("mode,tokens", [("graph", 2), ("direct", 2), ("graph", 128), ("direct", 32)])
def test_gpu_launch_cache(monkeypatch, mode, tokens):
    """The in-solution launch cache (CUDA graph or recorded direct launches, the combine a
    programmatic dependent launch when there is one): two buffer sets used alternately with
    new contents every call (each output checked), then the call captured inside a caller's
    graph and that graph replayed on new contents."""
    monkeypatch.setattr(K, "LAUNCH", mode)
    K._entries.clear()
    full = get("attention")
    w = _workload(full, tokens, 8462)
    sets = [_inputs(full, w, seed=40 + i, device="cuda") for i in range(2)]
    outs = [(torch.empty((tokens, 16, 512), dtype=torch.bfloat16, device="cuda"),
             torch.empty((tokens, 16), dtype=torch.float32, device="cuda")) for _ in range(2)]
    small = ("q_nope", "q_pe", "sparse_indices")
    for it in range(6):
        s = it % 2
        fresh = _inputs(full, w, seed=50 + it, device="cuda")
        for name in small:
            sets[s][name].copy_(fresh[name])
        outs[s][0].fill_(float("nan"))
        outs[s][1].fill_(float("nan"))
        K.run(**sets[s], output=outs[s][0], lse=outs[s][1])
        _gate_check(full, outs[s][0], outs[s][1], sets[s])
    assert len(K._entries) == 2 and all(K._entries.values())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.run(**sets[0], output=outs[0][0], lse=outs[0][1])
    fresh = _inputs(full, w, seed=60, device="cuda")
    for name in small:
        sets[0][name].copy_(fresh[name])
    outs[0][0].fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _gate_check(full, outs[0][0], outs[0][1], sets[0])
