"""The vLLM Triton fused-MoE baseline (``moe_vllm_triton``) at small sizes.

Without the wheel's files: the stand-in ops (alignment, SwiGLU) against torch and the one-line
skip reasons.  With them (``scripts/fetch-vllm-moe.sh``, then
``PYTHONPATH=src:.whl/vllm-extract``): the import of vLLM's modules with our stand-ins, the tuned
H200 config, vLLM's DeepSeek routing and per-token-group FP8 quantisation, and the whole pipeline,
vLLM's ``fused_moe_kernel`` included, against the definition's reference (Triton interpreter on
CPU).  Those are skipped, with the reason, when the files are not importable.
"""

import os

import pytest
import torch

from kernelwright.baselines import get_baseline
from kernelwright.baselines.moe_vllm_triton import kernel as vllm_kernel
from kernelwright.baselines.moe_vllm_triton import standin_ops
from kernelwright.baselines.moe_vllm_triton import vllm_fused_moe
from kernelwright.baselines.moe_vllm_triton.wheel_files import H200_CONFIG, WHEEL_FILES
from kernelwright.definitions import get
from kernelwright.definitions.moe_fp8 import reference as moe_ref

DEV = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
MISSING = vllm_fused_moe.availability_reason()
needs_wheel_files = pytest.mark.skipif(MISSING is not None, reason=f"vLLM files not importable: {MISSING}")


@pytest.fixture
def interpreter_scalar_index(monkeypatch):
    """Triton 3.6's interpreter turns a scalar tensor into a Python int with ``int(array)``, which
    numpy 2.x refuses for its 1-element 1-d arrays: vLLM's ``fused_moe_kernel`` loops over
    ``range(tl.cdiv(K, BLOCK_SIZE_K))`` with a runtime K.  Index through the element instead."""
    if not INTERPRETED:
        return
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", patch)


# --------------------------------------------------------------------------- without the files
def test_skip_reasons_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(vllm_fused_moe, "vllm_roots", lambda: [])
    with pytest.raises(vllm_fused_moe.VllmFusedMoeUnavailable, match="fetch-vllm-moe.sh"):
        vllm_fused_moe.extract_root()
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "envs.py").write_text("")
    monkeypatch.setattr(vllm_fused_moe, "vllm_roots", lambda: [tmp_path / "vllm"])
    with pytest.raises(vllm_fused_moe.VllmFusedMoeUnavailable) as err:
        vllm_fused_moe.extract_root()
    assert str(err.value) == (f"vllm 0.20.0 file {WHEEL_FILES[1]} not under {tmp_path} "
                              "(run scripts/fetch-vllm-moe.sh)")
    vllm_fused_moe.load.cache_clear()
    try:
        reason = get_baseline("moe_vllm_triton").availability()
    finally:
        vllm_fused_moe.load.cache_clear()
    assert reason.startswith("vllm 0.20.0 file ") and "\n" not in reason


def test_wheel_file_list():
    assert H200_CONFIG in WHEEL_FILES and len(set(WHEEL_FILES)) == len(WHEEL_FILES)
    assert all(f.startswith("vllm/") and not f.endswith("__init__.py") for f in WHEEL_FILES)


def _align_reference(topk_ids, num_slots, block_size, expert_map):
    """Per local expert, the flat pair indices routed to it (vLLM's moe_align_block_size)."""
    flat = topk_ids.reshape(-1).long()
    slot = expert_map.long()[flat] if expert_map is not None else torch.where(flat < num_slots, flat, -1)
    return [torch.nonzero(slot == e).flatten().tolist() for e in range(num_slots)]


@pytest.mark.parametrize("tokens,block_size,with_map", [(1, 16, True), (7, 16, True), (300, 64, True),
                                                        (300, 64, False), (40, 16, False)])
def test_align_matches_vllm_contract(tokens, block_size, with_map):
    gen = torch.Generator().manual_seed(tokens)
    num_experts, top_k = 256, 8
    topk_ids = torch.stack([torch.randperm(num_experts, generator=gen)[:top_k] for _ in range(tokens)])
    topk_ids = topk_ids.to(torch.int32).to(DEV)
    expert_map = vllm_kernel.expert_map(num_experts, 96, 32, torch.device(DEV)) if with_map else None
    numel = topk_ids.numel()
    padded_max = numel + num_experts * (block_size - 1)
    if numel < num_experts:
        padded_max = min(numel * block_size, padded_max)
    sorted_ids = torch.full((padded_max,), -7, dtype=torch.int32, device=DEV)
    expert_ids = torch.full((-(-padded_max // block_size),), -7, dtype=torch.int32, device=DEV)
    total = torch.full((1,), -7, dtype=torch.int32, device=DEV)
    standin_ops.moe_align_block_size(topk_ids, num_experts, block_size, sorted_ids, expert_ids, total, expert_map)

    groups = _align_reference(topk_ids.cpu(), num_experts, block_size, expert_map.cpu() if with_map else None)
    sizes = [-(-len(g) // block_size) * block_size for g in groups]
    assert int(total) == sum(sizes)
    sorted_ids, expert_ids = sorted_ids.cpu(), expert_ids.cpu()
    start = 0
    for e, (group, size) in enumerate(zip(groups, sizes)):
        seg = sorted_ids[start:start + size]
        assert sorted(seg[:len(group)].tolist()) == group, f"expert {e}"
        assert (seg[len(group):] == numel).all()
        assert (expert_ids[start // block_size:(start + size) // block_size] == e).all()
        start += size
    assert (sorted_ids[start:] == numel).all() and (expert_ids[start // block_size:] == 0).all()


def test_swiglu_takes_the_gate_second():
    torch.manual_seed(3)
    x = (torch.randn(9, 2 * 384, device=DEV) * 3).to(torch.bfloat16)
    out = torch.empty((9, 384), dtype=torch.bfloat16, device=DEV)
    standin_ops.swiglu(out, x)
    up, gate = x.float().split(384, dim=1)
    torch.testing.assert_close(out.float(), (torch.nn.functional.silu(gate) * up).bfloat16().float(),
                               rtol=1e-2, atol=1e-2)


def test_expert_map_marks_the_local_experts():
    table = vllm_kernel.expert_map(256, 224, 32, torch.device("cpu"))
    assert table[:224].eq(-1).all() and table[224:].tolist() == list(range(32))
    assert vllm_kernel.expert_map(256, 240, 32, torch.device("cpu"))[240:].tolist() == list(range(16))


# --------------------------------------------------------------------------- with the files
@needs_wheel_files
def test_load_takes_the_real_files_and_our_stand_ins():
    import sys

    v = vllm_fused_moe.load()
    root = vllm_fused_moe.extract_root()
    for mod in (v.fused_moe, v.utils, v.router, v.fp8_utils, v.envs):
        assert mod.__file__.startswith(str(root)) and not getattr(mod, "__kernelwright_standin__", False)
    for name in ("vllm.platforms", "vllm._custom_ops", "vllm.logger", "vllm.model_executor.layers.fused_moe"):
        assert sys.modules[name].__kernelwright_standin__
    assert v.fused_moe.moe_align_block_size.__module__.endswith("moe_align_block_size")  # vLLM's wrapper
    assert v.fused_moe.ops.moe_align_block_size is standin_ops.moe_align_block_size
    with pytest.raises(RuntimeError, match="stand-in"):
        sys.modules["vllm.model_executor.layers.fused_moe.config"].FusedMoEConfig()


@needs_wheel_files
def test_every_placeholder_is_imported_by_a_wheel_file():
    """The stand-ins stay minimal: each placeholder name is imported by one of the loaded files
    (``from M import N``, or ``M.N`` on a module imported whole)."""
    import ast
    import re

    root = vllm_fused_moe.extract_root()
    imported = set()
    for rel in WHEEL_FILES:
        if not rel.endswith(".py"):
            continue
        text = (root / rel).read_text()
        aliases = {}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.update((node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                aliases.update({a.asname or a.name: a.name for a in node.names})
        for alias, module in aliases.items():
            imported.update((module, attr) for attr in re.findall(rf"\b{re.escape(alias)}\.(\w+)", text))
    for module, names in vllm_fused_moe.PLACEHOLDERS.items():
        for name in names:
            assert (module, name) in imported, f"{module}.{name} is not imported by any wheel file"


@needs_wheel_files
def test_load_leaves_torch_as_it_was():
    """No torch._dynamo import (it replaces torch.manual_seed: the gate's integrity check), no
    torch attribute left changed, no thread started: in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys, threading, torch; seed, comp = torch.manual_seed, torch.compile; "
            "n = threading.active_count(); "
            "from kernelwright.baselines.moe_vllm_triton.vllm_fused_moe import load; load(); "
            "print('torch._dynamo' in sys.modules, torch.manual_seed is seed, torch.compile is comp, "
            "threading.active_count() - n)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "True", "0"], done.stdout


@needs_wheel_files
def test_h200_config_is_the_shipped_file(monkeypatch):
    fm = vllm_fused_moe.load().fused_moe
    monkeypatch.setattr(vllm_fused_moe.StandInPlatform, "get_device_name", staticmethod(lambda *a: "NVIDIA H200"))
    fm.get_moe_configs.cache_clear()
    try:
        w1 = torch.empty((32, 4096, 7168), dtype=torch.float8_e4m3fn, device="meta")
        w2 = torch.empty((32, 7168, 2048), dtype=torch.float8_e4m3fn, device="meta")
        assert fm.get_config_file_name(32, 2048, "fp8_w8a8", [128, 128]) == H200_CONFIG.rsplit("/", 1)[1]
        decode, prefill = vllm_kernel.tuned_config(w1, w2, 7), vllm_kernel.tuned_config(w1, w2, 14107)
        assert decode["BLOCK_SIZE_M"] == 16 and prefill["BLOCK_SIZE_M"] == 64 and prefill["GROUP_SIZE_M"] == 64
        hs = torch.empty((7, 7168), device="meta")
        assert vllm_kernel.config_source(None, None, hs, None, w1).startswith(
            H200_CONFIG.rsplit("/", 1)[1] + " entry 8: ")
    finally:
        fm.get_moe_configs.cache_clear()


def _moe_inputs(seq_len, offset, seed):
    builtin = get("moe__quick")
    wl = builtin.quick_workloads()[0].model_copy(update={"axes": {"seq_len": seq_len}})
    inputs = builtin.make_inputs(builtin.definition, wl, torch.Generator(device=DEV).manual_seed(seed),
                                 torch.device(DEV))
    if offset is None:  # the rank of the first token's first expert: at least one local pair
        ids, _ = moe_ref.deepseek_v3_routing(inputs["routing_logits"], inputs["routing_bias"], 2.5)
        offset = 32 * (int(ids[0, 0]) // 32)
    inputs["local_expert_offset"] = offset
    return builtin, [inputs[n] for n in builtin.definition.input_names]


@needs_wheel_files
@pytest.mark.parametrize("seq_len", [1, 6, 40])
def test_routing_is_deepseek_v3(seq_len):
    _, args = _moe_inputs(seq_len, 0, seed=seq_len)
    logits, bias, hidden = args[0], args[1], args[2]
    weights, ids = vllm_kernel.route(hidden, logits, bias, 2.5)
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32
    ref_ids, ref_w = moe_ref.deepseek_v3_routing(logits, bias, 2.5)
    assert torch.equal(ids.long().sort(dim=1).values, ref_ids.sort(dim=1).values)
    got = torch.zeros_like(ref_w).scatter_(1, ids.long(), weights)
    torch.testing.assert_close(got, ref_w, rtol=1e-4, atol=1e-5)  # FlashInfer's kernel on a GPU


@needs_wheel_files
def test_vllm_per_token_group_quant():
    v = vllm_fused_moe.load()
    torch.manual_seed(4)
    x = (torch.randn(24, 256, device=DEV) * 30).to(torch.bfloat16)
    q, scale = v.utils.moe_kernel_quantize_input(A=x, A_scale=None, quant_dtype=torch.float8_e4m3fn,
                                                 per_act_token_quant=False, block_shape=[128, 128])
    blocks = x.float().view(24, 2, 128)
    want_scale = blocks.abs().amax(-1).clamp_min(1e-10) / 448.0
    if vllm_fused_moe._is_deep_gemm_e8m0_used():  # vLLM's UE8M0 choice on Hopper with DeepGEMM
        want_scale = torch.exp2(torch.ceil(torch.log2(want_scale)))
    torch.testing.assert_close(scale, want_scale, rtol=1e-6, atol=0)
    want = (blocks / want_scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    got = q.float().view(24, 2, 128)
    # exact, or one e4m3 step apart: Triton's fp32 division is not IEEE-rounded on the GPU, and
    # the interpreter rounds ties away from even
    ok = (got - want).abs() <= want.abs() * 0.125
    if INTERPRETED:  # Triton 3.6's interpreter also rounds into the next binade (half the power of two)
        ok |= (got * 2 == want) & (torch.frexp(want).mantissa.abs() == 0.5)
    assert (got == want).float().mean() > 0.95
    assert ok.all(), f"{int((~ok).sum())} FP8 values differ"


def _exact_fp8_quant(A, A_scale, quant_dtype, per_act_token_quant, block_shape=None, **_):
    """torch per-token-group quantisation (fp32 scales), for a pipeline check free of the
    interpreter's FP8 rounding bug."""
    rows, cols = A.shape
    blocks = A.float().view(rows, cols // 128, 128)
    scale = blocks.abs().amax(-1).clamp_min(1e-10) / 448.0
    return (blocks / scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(rows, cols), scale


@needs_wheel_files
@pytest.mark.parametrize("seq_len,offset,exact_quant", [(1, None, True), (5, 224, True), (37, 96, True),
                                                        (37, 96, False), (3, 0, False)])
def test_pipeline_matches_reference(interpreter_scalar_index, monkeypatch, seq_len, offset, exact_quant):
    v = vllm_fused_moe.load()
    if exact_quant:
        monkeypatch.setattr(v.utils, "moe_kernel_quantize_input", _exact_fp8_quant)
    builtin, args = _moe_inputs(seq_len, offset, seed=seq_len)
    out = torch.full((seq_len, args[2].shape[1]), float("nan"), dtype=torch.bfloat16, device=DEV)
    vllm_kernel.run(*args, out)
    ref = builtin.reference(*args).float()
    err = (out.float() - ref).abs()
    fail = (err > 1.0) & (err / (ref.abs() + 1e-8) > 0.3)
    assert 1.0 - fail.float().mean().item() >= 0.9
    if ref.abs().max() == 0:
        assert (out == 0).all()  # no local pair: zeros, not garbage
        return
    # quick sizes sum over I = 128 only: 0.019-0.033 measured with exact rounding, fp32 or UE8M0
    # scales (the GPU's); the interpreter's FP8 rounding bugs cost more
    rel = (err.norm() / ref.norm()).item()
    assert rel <= (0.05 if exact_quant or not INTERPRETED else 0.12), rel


@pytest.mark.gpu
@needs_wheel_files
def test_fused_grouped_topk_standin_on_gpu():
    if not standin_ops.has_grouped_topk():
        pytest.skip("FlashInfer not importable")
    _, args = _moe_inputs(100, 0, seed=5)
    logits, bias = args[0], args[1]
    weights, ids = vllm_fused_moe.load().router.fused_grouped_topk(
        hidden_states=args[2], gating_output=logits, topk=8, renormalize=True, e_score_correction_bias=bias,
        num_expert_group=8, topk_group=4, scoring_func="sigmoid", routed_scaling_factor=2.5)
    ref_ids, ref_w = moe_ref.deepseek_v3_routing(logits, bias, 2.5)
    assert torch.equal(ids.long().sort(dim=1).values, ref_ids.sort(dim=1).values)
    torch.testing.assert_close(torch.zeros_like(ref_w).scatter_(1, ids.long(), weights), ref_w,
                               rtol=1e-4, atol=1e-5)
