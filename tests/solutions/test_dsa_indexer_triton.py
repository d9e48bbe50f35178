"""The Triton DSA top-k indexer solution against our reference, with the gate's top-k check.

CPU: the kernels run under the Triton interpreter (tests/conftest.py) at small page counts.
GPU (``-m gpu``, run by the lead on the H200): contest sizes and a held-out-like long row.
"""

import importlib

import pytest
import torch

from kernelwright.definitions import get as get_definition
from kernelwright.definitions.dsa_indexer import reference
from kernelwright.gate.checkers import check_outputs
from kernelwright.inputs import make_generator
from kernelwright.solutions import SHIPPED_ROOT, load_solution_folder
from kernelwright.trace import RandomInput, Workload

FOLDER = SHIPPED_ROOT / "dsa_indexer_triton"
kernel = importlib.import_module("kernelwright.solutions.dsa_indexer_triton.kernel")
BUILTIN = get_definition("indexer")
TOPK = 2048
PS = 64


def _inputs(batch, max_pages, num_pages, seed, device, seq_lens=None):
    w = Workload(uuid="t", axes={"batch_size": batch, "max_num_pages": max_pages, "num_pages": num_pages},
                 inputs={n: RandomInput() for n in BUILTIN.definition.inputs})
    dev = torch.device(device)
    inputs = BUILTIN.make_inputs(BUILTIN.definition, w, make_generator(seed, device), dev)
    if seq_lens is not None:
        inputs["seq_lens"] = torch.tensor(seq_lens, dtype=torch.int32, device=dev)
    return inputs


def _run(inputs):
    batch = inputs["q_index_fp8"].shape[0]
    out = torch.full((batch, TOPK), 12345, dtype=torch.int32, device=inputs["q_index_fp8"].device)
    kernel.run(**inputs, topk_indices=out)
    return out


def _check(inputs, out, expected):
    """The gate's topk_indices check: validity, no duplicates, exact count, sorted scores."""
    assert out.shape == expected.shape and out.dtype == torch.int32
    q = inputs["q_index_fp8"].to(torch.float32)
    keys = reference.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    out, expected = out.cpu(), expected.cpu()
    for b in range(out.shape[0]):
        seq_len = max(int(inputs["seq_lens"][b]), 0)
        count = min(TOPK, seq_len)
        row = out[b].to(torch.long)
        assert bool((row[count:] == -1).all()), f"row {b}: slots from {count} must be -1"
        got = row[:count]
        assert bool((got >= 0).all()), f"row {b}: {int((got < 0).sum())} invalid ids among the first {count}"
        assert got.unique().numel() == count, f"row {b}: duplicate ids"
        token_ids = reference.row_token_ids(inputs["block_table"][b], seq_len, PS)
        allowed = torch.zeros(keys.shape[0], dtype=torch.bool, device=keys.device)
        allowed[token_ids] = True
        assert bool(allowed[got.to(keys.device)].all()), f"row {b}: ids outside the row's first {seq_len} tokens"
        if count == 0:
            continue
        weights = inputs["weights"][b].to(torch.float32)
        mine = reference.row_scores(q[b], keys, weights, got.to(keys.device)).sort().values
        ref = reference.row_scores(q[b], keys, weights, expected[b, :count].to(torch.long).to(keys.device))
        torch.testing.assert_close(mine, ref.sort().values, atol=1e-2, rtol=1e-2,
                                   msg=lambda m: f"row {b} (seq_len {seq_len}): {m}")
    verdict = check_outputs(BUILTIN.checker, {"topk_indices": out}, {"topk_indices": expected},
                            BUILTIN.tolerance, inputs)
    assert verdict.passed, f"the gate's default verdict (contest + strict rule): {verdict.detail}"


def _roundtrip(inputs):
    out = _run(inputs)
    _check(inputs, out, BUILTIN.reference(**inputs))
    return out


def test_manifest_loads():
    sol = load_solution_folder(FOLDER)
    assert sol.definition == BUILTIN.definition.name
    assert sol.spec.entry_point == "kernel.py::run" and sol.spec.destination_passing_style
    for src in sol.sources:
        assert "import kernelwright" not in src.content and "from kernelwright" not in src.content


def test_all_selected_fast_path():
    # max_pages*64 = 1280 <= 2048: every valid token, in any order, then -1.
    inputs = _inputs(4, 20, 90, seed=1, device="cpu", seq_lens=[1280, 1, 0, 700])
    out = _roundtrip(inputs)
    assert bool((out[2] == -1).all())


def test_just_above_topk():
    _roundtrip(_inputs(1, 33, 40, seed=2, device="cpu", seq_lens=[2049]))


def test_mixed_rows():
    # Full row, short rows beside long ones, exactly topk, non-multiples of 64, seq_len 1 and 0.
    inputs = _inputs(7, 36, 260, seed=3, device="cpu", seq_lens=[2304, 100, 2100, 1, 0, 2048, 2250])
    _roundtrip(inputs)


def test_ties_all_zero_scores():
    inputs = _inputs(2, 36, 80, seed=4, device="cpu", seq_lens=[2200, 2304])
    inputs["weights"][0] = 0.0  # every score of row 0 is 0: any 2048 valid ids pass
    _roundtrip(inputs)


def test_ties_duplicate_pages_content():
    # Many exactly equal scores around the threshold: copy page contents.
    inputs = _inputs(1, 40, 45, seed=5, device="cpu", seq_lens=[2500])
    cache = inputs["k_index_cache_fp8"]
    pages = inputs["block_table"][0].to(torch.long)
    cache[pages[1:]] = cache[pages[0]].clone()
    _roundtrip(inputs)


def test_streamed_topk_path(monkeypatch):
    # The chunked (non-resident) top-k path at small sizes: a normal row, an all-tie row, a
    # short row.
    monkeypatch.setattr(kernel, "_RESIDENT_MAX_TOKENS", 1024)
    monkeypatch.setattr(kernel, "_CHUNK_TOKENS", 512)
    inputs = _inputs(3, 40, 130, seed=6, device="cpu", seq_lens=[2560, 2113, 900])
    inputs["weights"][1] = 0.0
    _roundtrip(inputs)


@pytest.mark.parametrize("target", [40, 4])
def test_streamed_pages_per_program(monkeypatch, target):
    # Streamed path with several pages per scoring program (2 and 8), with a partial last
    # chunk (37 pages).
    monkeypatch.setattr(kernel, "_RESIDENT_MAX_TOKENS", 1024)
    monkeypatch.setattr(kernel, "_SCORE_TARGET_PROGRAMS", target)
    assert kernel._pages_per_prog(2, 37) == (2 if target == 40 else 8)
    _roundtrip(_inputs(2, 37, 80, seed=10, device="cpu", seq_lens=[2368, 2111]))


def test_dispatch_tables():
    assert [kernel._path(4, t) for t in (4096, 8192, 16384, 32768)] == ["fused", "split", "fused", "streamed"]
    assert kernel._fused_config(1, 45, 4096) == (2, 1, 8, 1)
    assert kernel._fused_config(8, 45, 4096) == (2, 1, 8, 1)
    assert kernel._fused_config(31, 45, 4096) == (2, 2, 8, 1)      # 31 rows x 12 programs
    assert kernel._fused_config(2, 256, 16384) == (4, 1, 16, 1)
    for batch in (1, 7, 31, 64):
        for pages in (33, 64, 129, 256):
            tile = 1 << (pages * 64 - 1).bit_length()
            ppd, gpp, warps, pivots = kernel._fused_config(batch, pages, tile)
            assert warps == 4 * ppd and ppd * 2048 <= tile and gpp <= 8


@pytest.mark.parametrize("config", [(2, 1, 8, 3), (1, 4, 4, 1), (4, 2, 16, 3)])
def test_fused_configs(monkeypatch, config):
    # 4-way search; one page per dot with 4 page groups per program (37 pages: a partial last
    # program); 4-page groups at 16 warps.
    monkeypatch.setattr(kernel, "_fused_config", lambda b, p, t: config)
    inputs = _inputs(2, 37, 130, seed=20 + config[0], device="cpu", seq_lens=[2368, 2111])
    inputs["weights"][1] = 0.0
    _roundtrip(inputs)


def test_split_tile_8192():
    # 70 pages: an 8192-key tile, the split path (score kernel + resident top-k kernel); a row
    # just above topk beside it.
    _roundtrip(_inputs(2, 70, 150, seed=21, device="cpu", seq_lens=[4470, 2050]))


def test_fused_tile_8192(monkeypatch):
    # The fused kernel at an 8192-key tile (4 pages per dot, 16 warps), as a 16384 tile runs it.
    monkeypatch.setattr(kernel, "_SPLIT_TILES", ())
    _roundtrip(_inputs(1, 70, 150, seed=22, device="cpu", seq_lens=[4470]))


def test_arrival_counters_reset(monkeypatch):
    # The last program of each row resets its counter: a persistent buffer (as on the GPU)
    # reads all-zero after every call, and a second call on it is still right.
    counters = torch.zeros(64, dtype=torch.int32)
    monkeypatch.setattr(kernel, "_arrival_counters", lambda device, batch: counters)
    monkeypatch.setattr(kernel, "_fused_config", lambda b, p, t: (1, 2, 4, 3))
    for seed in (30, 31):
        _roundtrip(_inputs(2, 34, 120, seed=seed, device="cpu", seq_lens=[2176, 2100]))
        assert bool((counters == 0).all())


def test_output_not_cached():
    a = _inputs(1, 34, 40, seed=7, device="cpu", seq_lens=[2176])
    b = _inputs(1, 34, 40, seed=8, device="cpu", seq_lens=[2176])
    _roundtrip(a)
    _roundtrip(b)


# ----------------------------------------------------------------------------------------------
# GPU (H200): contest shapes and a held-out-like long row.

@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 16, 31])
@pytest.mark.parametrize("max_pages", [20, 45, 91])
def test_gpu_contest_sizes(batch, max_pages):
    inputs = _inputs(batch, max_pages, 11923, seed=100 + batch * 7 + max_pages, device="cuda")
    _roundtrip(inputs)


@pytest.mark.gpu
def test_gpu_contest_mixed_rows():
    lens = [5824, 1, 0, 2048, 2049, 2100, 5000, 63, 64, 65, 4097, 5823]
    inputs = _inputs(len(lens), 91, 11923, seed=11, device="cuda", seq_lens=lens)
    inputs["weights"][3] = 0.0
    inputs["weights"][6] = 0.0
    _roundtrip(inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("batch,max_pages", [(4, 256), (64, 96), (2, 300)])
def test_gpu_held_out_like(batch, max_pages):
    inputs = _inputs(batch, max_pages, max(11923, batch * max_pages), seed=12 + batch, device="cuda")
    _roundtrip(inputs)


@pytest.mark.gpu
def test_gpu_timing_report():
    """Not a check: prints microseconds per call for a few shapes, back-to-back calls of ``run``
    (its launch cache: host overhead included) and one call replayed from a CUDA graph."""
    iters = 50
    for batch, max_pages in [(1, 20), (31, 20), (1, 45), (16, 45), (1, 91), (31, 91), (4, 256), (64, 96)]:
        inputs = _inputs(batch, max_pages, max(11923, batch * max_pages), seed=3, device="cuda")
        out = torch.empty((batch, TOPK), dtype=torch.int32, device="cuda")
        for _ in range(3):
            kernel.run(**inputs, topk_indices=out)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            kernel.run(**inputs, topk_indices=out)
        end.record()
        torch.cuda.synchronize()
        eager = start.elapsed_time(end) * 1e3 / iters
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                kernel.run(**inputs, topk_indices=out)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        replay = start.elapsed_time(end) * 1e3 / iters
        _check(inputs, out, BUILTIN.reference(**inputs))
        print(f"\nindexer triton B={batch} max_pages={max_pages}: eager {eager:.1f} us/call, "
              f"graph replay {replay:.1f} us/call")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["graph", "direct"])
def test_gpu_launch_cache(monkeypatch, mode):
    """The in-solution launch cache (CUDA graph or recorded direct launches): two buffer sets
    used alternately with new contents every call (each output checked), then the call
    captured inside a caller's graph and that graph replayed on new contents."""
    monkeypatch.setattr(kernel, "LAUNCH", mode)
    kernel._entries.clear()
    sets = [_inputs(8, 45, 11923, seed=40 + i, device="cuda") for i in range(2)]
    outs = [torch.empty((8, TOPK), dtype=torch.int32, device="cuda") for _ in range(2)]
    for it in range(6):
        s = it % 2
        fresh = _inputs(8, 45, 11923, seed=50 + it, device="cuda")
        for name in ("q_index_fp8", "weights", "seq_lens", "block_table"):
            sets[s][name].copy_(fresh[name])
        outs[s].fill_(12345)
        kernel.run(**sets[s], topk_indices=outs[s])
        _check(sets[s], outs[s], BUILTIN.reference(**sets[s]))
    assert len(kernel._entries) == 2 and all(kernel._entries.values())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel.run(**sets[0], topk_indices=outs[0])
    fresh = _inputs(8, 45, 11923, seed=60, device="cuda")
    for name in ("q_index_fp8", "weights", "seq_lens", "block_table"):
        sets[0][name].copy_(fresh[name])
    outs[0].fill_(12345)
    graph.replay()
    torch.cuda.synchronize()
    _check(sets[0], outs[0], BUILTIN.reference(**sets[0]))
