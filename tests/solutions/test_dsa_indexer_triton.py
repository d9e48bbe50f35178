"""The shipped Triton DSA top-k indexer (solutions/dsa_indexer_triton) against our reference,
with the gate's top-k check: the width dispatch, the all-selected launch, the short-row path and
the long-row path.

CPU: the kernels run under the Triton interpreter (tests/conftest.py) at small page counts; the
long-row path is forced (kernel.FORCE_PATH) at those widths, its plan (grid, pages per work item,
tiles) forced small so that the multi-program paths run, and it runs once at the width where the
dispatch takes it (256 pages).
GPU (``-m gpu``, run by the lead on the H200): contest sizes, serving-envelope rows up to 128K
tokens, both paths forced at wide rows, and the launch cache.
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
short_rows = importlib.import_module("kernelwright.solutions.dsa_indexer_triton.short_rows")
long_rows = importlib.import_module("kernelwright.solutions.dsa_indexer_triton.long_rows")
common = importlib.import_module("kernelwright.solutions.dsa_indexer_triton.common")
BUILTIN = get_definition("indexer")
TOPK = 2048
PS = 64
PATHS = ("short_rows", "long_rows")


def _inputs(batch, max_pages, num_pages, seed, device, seq_lens=None):
    w = Workload(uuid="t", axes={"batch_size": batch, "max_num_pages": max_pages, "num_pages": num_pages},
                 inputs={n: RandomInput() for n in BUILTIN.definition.inputs})
    dev = torch.device(device)
    inputs = BUILTIN.make_inputs(BUILTIN.definition, w, make_generator(seed, device), dev)
    if seq_lens is not None:
        inputs["seq_lens"] = torch.tensor(seq_lens, dtype=torch.int32, device=dev)
    return inputs


GUARD = 12345


def _run(inputs):
    """The kernel's output for these inputs, written into a row-strided view of a poisoned
    buffer whose guard rows and columns must stay untouched."""
    batch = inputs["q_index_fp8"].shape[0]
    buf = torch.full((batch + 2, TOPK + 64), GUARD, dtype=torch.int32, device=inputs["q_index_fp8"].device)
    out = buf[1:batch + 1, :TOPK]
    kernel.run(**inputs, topk_indices=out)
    guards = torch.cat([buf[0], buf[-1], buf[1:-1, TOPK:].reshape(-1)])
    assert bool((guards == GUARD).all()), "writes outside the output rows"
    return out


def _check(inputs, out, expected):
    """Strict form of the gate's topk_indices check: exactly min(topk, seq_len) valid distinct
    ids of the row first, -1 after, sorted scores within atol = rtol = 1e-2; then the gate's
    own checker on the same output."""
    assert out.shape == expected.shape and out.dtype == torch.int32
    q = inputs["q_index_fp8"].to(torch.float32)
    keys = reference.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    cpu_out, cpu_expected = out.cpu(), expected.cpu()
    for b in range(cpu_out.shape[0]):
        seq_len = max(int(inputs["seq_lens"][b]), 0)
        count = min(TOPK, seq_len)
        row = cpu_out[b].to(torch.long)
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
        ref = reference.row_scores(q[b], keys, weights, cpu_expected[b, :count].to(torch.long).to(keys.device))
        torch.testing.assert_close(mine, ref.sort().values, atol=1e-2, rtol=1e-2,
                                   msg=lambda m: f"row {b} (seq_len {seq_len}): {m}")
    verdict = check_outputs(BUILTIN.checker, {"topk_indices": out}, {"topk_indices": expected},
                            BUILTIN.tolerance, inputs)
    assert verdict.passed, verdict.detail


def _assert_workspace_clean(device):
    """Every call leaves the shared per-row counters, cursors and histograms at zero."""
    key = (torch.device(device).type, torch.device(device).index)
    for ws in common._workspaces.get(key, []):
        for name in ("hist", "arrive", "cursor"):
            assert int(getattr(ws, name).abs().sum()) == 0, f"workspace {name} not reset"


def _roundtrip(inputs):
    out = _run(inputs)
    _check(inputs, out, BUILTIN.reference(**inputs))
    _assert_workspace_clean(inputs["q_index_fp8"].device)
    return out


def _with_ties(inputs):
    """Row 0 with every score equal (zero weights); row 1's pages repeating three contents, so
    that every score there has many exact copies and the top-k threshold falls among ties."""
    inputs["weights"][0] = 0.0
    cache = inputs["k_index_cache_fp8"]
    pages = inputs["block_table"][1].to(torch.long)
    for i in range(3, pages.numel()):
        cache[pages[i]] = cache[pages[i % 3]].clone()
    return inputs


def _force_path(monkeypatch, path):
    """Every call wider than topk takes ``path`` (None: the shipped dispatch)."""
    monkeypatch.setattr(kernel, "FORCE_PATH", path)


def _force_plan(monkeypatch, one_launch, pages_per_item, stripes):
    """The long-row path, with this plan at every shape."""
    _force_path(monkeypatch, "long_rows")
    plan = long_rows._Plan(one_launch, pages_per_item, stripes)
    monkeypatch.setattr(long_rows, "_plan", lambda batch, max_pages, page_size, num_sms: plan)


# ----------------------------------------------------------------------------------------------
# The solution and its dispatch

def test_manifest_loads():
    sol = load_solution_folder(FOLDER)
    assert sol.definition == BUILTIN.definition.name
    assert sol.spec.entry_point == "kernel.py::run" and sol.spec.destination_passing_style
    assert {src.path for src in sol.sources} >= {"kernel.py", "common.py", "short_rows.py", "long_rows.py"}
    for src in sol.sources:
        assert "import kernelwright" not in src.content and "from kernelwright" not in src.content


def test_dispatch_on_width():
    # The block table's width alone picks the path: long rows exactly from LONG_ROW_MIN_PAGES
    # = 256 pages (16K tokens), rows no wider than topk all selected, short rows between.
    assert kernel.LONG_ROW_MIN_PAGES == 256
    assert kernel.FORCE_PATH is None
    assert [kernel.path_for(p, PS, TOPK) for p in (1, 32, 33, 91, 128, 255, 256, 257, 2048)] == (
        ["all_selected"] * 2 + ["short_rows"] * 4 + ["long_rows"] * 3)


def test_forced_path(monkeypatch):
    # FORCE_PATH replaces the width dispatch for rows wider than topk only.
    for path in PATHS:
        _force_path(monkeypatch, path)
        assert [kernel.path_for(p, PS, TOPK) for p in (32, 33, 255, 256)] == ["all_selected"] + [path] * 3


def test_all_selected_fast_path():
    # max_pages*64 = 1280 <= 2048: every valid token, in any order, then -1.
    inputs = _inputs(4, 20, 90, seed=1, device="cpu", seq_lens=[1280, 1, 0, 700])
    out = _roundtrip(inputs)
    assert bool((out[2] == -1).all())


def test_long_rows_from_256_pages():
    # The shipped dispatch at 256 pages (16K tokens): the long-row path with its default plan
    # (two launches), a full row beside a short one.
    assert not long_rows._plan(2, 256, PS, long_rows._CPU_SMS).one_launch
    _roundtrip(_inputs(2, 256, 520, seed=16, device="cpu", seq_lens=[16384, 2500]))


# ----------------------------------------------------------------------------------------------
# Both paths: the same rows through each

@pytest.mark.parametrize("path", PATHS)
def test_just_above_topk(monkeypatch, path):
    _force_path(monkeypatch, path)
    _roundtrip(_inputs(1, 33, 40, seed=2, device="cpu", seq_lens=[2049]))


@pytest.mark.parametrize("path", PATHS)
def test_mixed_rows(monkeypatch, path):
    # Full row, short rows beside long ones, exactly topk and topk + 1, non-multiples of 64,
    # seq_len 1 and 0 (long rows: one launch, rows up to 8192 tokens wide).
    _force_path(monkeypatch, path)
    inputs = _inputs(8, 36, 300, seed=3, device="cpu", seq_lens=[2304, 100, 2100, 1, 0, 2048, 2049, 2250])
    _roundtrip(inputs)


@pytest.mark.parametrize("path", PATHS)
def test_ties_all_zero_scores(monkeypatch, path):
    _force_path(monkeypatch, path)
    inputs = _inputs(2, 36, 80, seed=4, device="cpu", seq_lens=[2200, 2304])
    inputs["weights"][0] = 0.0  # every score of row 0 is 0: any 2048 valid ids pass
    _roundtrip(inputs)


@pytest.mark.parametrize("path", PATHS)
def test_ties_duplicate_pages_content(monkeypatch, path):
    # Many exactly equal scores around the threshold: copy page contents.
    _force_path(monkeypatch, path)
    inputs = _inputs(1, 40, 45, seed=5, device="cpu", seq_lens=[2500])
    cache = inputs["k_index_cache_fp8"]
    pages = inputs["block_table"][0].to(torch.long)
    cache[pages[1:]] = cache[pages[0]].clone()
    _roundtrip(inputs)


@pytest.mark.parametrize("pivots", [2, 3, 4])
@pytest.mark.parametrize("path", PATHS)
def test_select_pivots(monkeypatch, path, pivots):
    # The search for the k-th key with several pivots per step (common._kth_key_multi) in every
    # resident select: random rows of mixed lengths (the short rows with and without their
    # histogram start), a row of equal scores and a row whose threshold falls among exact ties.
    _force_path(monkeypatch, path)
    monkeypatch.setattr(short_rows, "SELECT_PIVOTS", pivots)
    monkeypatch.setattr(long_rows, "SELECT_PIVOTS", pivots)
    for hist in (True, False):
        monkeypatch.setattr(short_rows, "HIST", hist)
        _roundtrip(_inputs(4, 36, 160, seed=40 + pivots, device="cpu", seq_lens=[2304, 2100, 2049, 1000]))
    inputs = _inputs(2, 40, 100, seed=50 + pivots, device="cpu", seq_lens=[2500, 2400])
    _roundtrip(_with_ties(inputs))


@pytest.mark.parametrize("path", PATHS)
def test_output_not_cached(monkeypatch, path):
    _force_path(monkeypatch, path)
    a = _inputs(1, 34, 40, seed=7, device="cpu", seq_lens=[2176])
    b = _inputs(1, 34, 40, seed=8, device="cpu", seq_lens=[2176])
    _roundtrip(a)
    _roundtrip(b)


def test_checker_rejects_wrong_selection():
    # The checks above can fail: swapping the best selected token for the worst unselected one,
    # or duplicating an id, is caught.
    inputs = _inputs(1, 40, 45, seed=7, device="cpu", seq_lens=[2500])
    out = _run(inputs)
    expected = BUILTIN.reference(**inputs)
    _check(inputs, out, expected)
    q = inputs["q_index_fp8"].to(torch.float32)
    keys = reference.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    ids = reference.row_token_ids(inputs["block_table"][0], 2500, PS)
    scores = reference.row_scores(q[0], keys, inputs["weights"][0], ids)
    chosen = set(out[0].tolist())
    worst_unselected = min((s, i) for s, i in zip(scores.tolist(), ids.tolist()) if i not in chosen)[1]
    best = max(range(TOPK), key=lambda j: scores[(ids == out[0, j]).nonzero()[0, 0]].item())
    swapped = out.clone()
    swapped[0, best] = worst_unselected
    with pytest.raises(AssertionError):
        _check(inputs, swapped, expected)
    duplicated = out.clone()
    duplicated[0, 1] = duplicated[0, 0]
    with pytest.raises(AssertionError):
        _check(inputs, duplicated, expected)


@pytest.mark.parametrize("fn,cap,max_pages,seq_lens,path", [
    (short_rows._fused_kernel, 128, 37, [2368, 2111], None),      # 4096-key tile: fused
    (short_rows._score_kernel, 96, 70, [4470, 2050], None),       # 8192-key tile: split
    (long_rows._score_kernel, 80, 36, [2300, 2113], "long_rows"),  # two launches, 2-page items
])
def test_register_caps(monkeypatch, fn, cap, max_pages, seq_lens, path):
    # A register cap (kernel.MAXNREG: Triton's maxnreg on that kernel's launches) changes the
    # build only: the same ids as without it (the interpreter accepts the option and ignores it).
    meta = {"num_warps": 4}
    shipped = kernel.MAXNREG.get(fn)
    assert kernel.with_register_cap(fn, meta) == (dict(meta, maxnreg=shipped) if shipped else meta)
    monkeypatch.setattr(kernel, "MAXNREG", {})
    assert kernel.with_register_cap(fn, meta) is meta              # no cap: launches unchanged
    if path:
        _force_plan(monkeypatch, False, 2, 2)
    inputs = _inputs(2, max_pages, 160, seed=cap, device="cpu", seq_lens=seq_lens)
    uncapped = _roundtrip(inputs).clone()
    monkeypatch.setattr(kernel, "MAXNREG", {fn: cap})
    assert kernel.with_register_cap(fn, meta) == {"num_warps": 4, "maxnreg": cap}
    launched = []                                                  # the options of every launch
    real = kernel.with_register_cap

    def spy(f, m):
        launched.append((f, real(f, m)))
        return launched[-1][1]
    monkeypatch.setattr(kernel, "with_register_cap", spy)
    capped = _roundtrip(inputs)
    assert [m.get("maxnreg") for f, m in launched if f is fn] == [cap]
    assert torch.equal(capped.sort(dim=1).values, uncapped.sort(dim=1).values)


def test_tuning_harness_cap_variants():
    # kernelwright.tuning.dsa times register caps on the kernel the shipped dispatch runs at a
    # shape (kernel.MAXNREG, restored after each sweep point), before the short-row configs.
    from kernelwright.tuning import dsa

    assert dsa.idx_variants(1, 20) == []                                    # all selected
    assert dsa.idx_variants(32, 512) == [("maxnreg", long_rows._score_kernel, c) for c in (128, 96, 80)]
    assert dsa.idx_variants(64, 256)[:3] == dsa.idx_variants(32, 512)
    assert dsa.idx_variants(64, 64) == ([("maxnreg", short_rows._fused_kernel, c) for c in (128, 80)]
                                        + dsa.IDX_SWEEP[4096])
    assert dsa.idx_variants(64, 96)[:2] == [("maxnreg", short_rows._score_kernel, c) for c in (128, 96)]
    shipped = dict(kernel.MAXNREG)
    label, undo = dsa.idx_override(32, 512, ("maxnreg", long_rows._score_kernel, 80))
    assert label == "maxnreg 80 long_rows._score_kernel"
    assert kernel.MAXNREG == {**shipped, long_rows._score_kernel: 80} and kernel.FORCE_PATH is None
    undo()
    assert kernel.MAXNREG == shipped


# ----------------------------------------------------------------------------------------------
# Short-row path (short_rows.py)

def test_streamed_topk_path(monkeypatch):
    # The chunked (non-resident) top-k path at small sizes: a normal row, an all-tie row, a
    # short row.
    monkeypatch.setattr(short_rows, "_RESIDENT_MAX_TOKENS", 1024)
    monkeypatch.setattr(short_rows, "_CHUNK_TOKENS", 512)
    inputs = _inputs(3, 40, 130, seed=6, device="cpu", seq_lens=[2560, 2113, 900])
    inputs["weights"][1] = 0.0
    _roundtrip(inputs)


@pytest.mark.parametrize("target", [40, 4])
def test_streamed_pages_per_program(monkeypatch, target):
    # Streamed path with several pages per scoring program (2 and 8), with a partial last
    # chunk (37 pages).
    monkeypatch.setattr(short_rows, "_RESIDENT_MAX_TOKENS", 1024)
    monkeypatch.setattr(short_rows, "_SCORE_TARGET_PROGRAMS", target)
    assert short_rows._pages_per_prog(2, 37) == (2 if target == 40 else 8)
    _roundtrip(_inputs(2, 37, 80, seed=10, device="cpu", seq_lens=[2368, 2111]))


def test_short_rows_schedule_tables():
    assert [short_rows._schedule(4, t) for t in (4096, 8192, 16384, 32768)] == ["fused", "split", "fused", "streamed"]
    assert short_rows._fused_config(1, 45, 4096) == (2, 1, 8)
    assert short_rows._fused_config(8, 45, 4096) == (2, 1, 8)
    assert short_rows._fused_config(31, 45, 4096) == (2, 2, 8)      # 31 rows x 12 programs
    assert short_rows._fused_config(2, 256, 16384) == (4, 1, 16)
    for batch in (1, 7, 31, 64):
        for pages in (33, 64, 129, 256):
            tile = 1 << (pages * 64 - 1).bit_length()
            ppd, gpp, warps = short_rows._fused_config(batch, pages, tile)
            assert warps == 4 * ppd and ppd * 2048 <= tile and gpp <= 8


@pytest.mark.parametrize("config,hist", [((2, 1, 8), False), ((1, 4, 4), True), ((4, 2, 16), True)])
def test_fused_configs(monkeypatch, config, hist):
    # Bisection over the row; one page per dot with 4 page groups per program (37 pages: a
    # partial last program); 4-page groups at 16 warps; the last two start from the histogram.
    monkeypatch.setattr(short_rows, "_fused_config", lambda b, p, t: config)
    monkeypatch.setattr(short_rows, "HIST", hist)
    inputs = _inputs(2, 37, 130, seed=20 + config[0], device="cpu", seq_lens=[2368, 2111])
    inputs["weights"][1] = 0.0
    _roundtrip(inputs)


def test_split_tile_8192():
    # 70 pages: an 8192-key tile, the split path (score kernel + resident top-k kernel); a row
    # just above topk beside it.
    _roundtrip(_inputs(2, 70, 150, seed=21, device="cpu", seq_lens=[4470, 2050]))


def test_fused_tile_8192(monkeypatch):
    # The fused kernel at an 8192-key tile (4 pages per dot, 16 warps), as a 16384 tile runs it.
    monkeypatch.setattr(short_rows, "_SPLIT_TILES", ())
    _roundtrip(_inputs(1, 70, 150, seed=22, device="cpu", seq_lens=[4470]))


def test_arrival_counters_reset(monkeypatch):
    # The last program of each row resets its counter: a persistent buffer (as on the GPU)
    # reads all-zero after every call, and a second call on it is still right.
    counters = torch.zeros(64, dtype=torch.int32)
    monkeypatch.setattr(short_rows, "_arrival_counters", lambda device, batch: counters)
    monkeypatch.setattr(short_rows, "_fused_config", lambda b, p, t: (1, 2, 4))
    for seed in (30, 31):
        _roundtrip(_inputs(2, 34, 120, seed=seed, device="cpu", seq_lens=[2176, 2100]))
        assert bool((counters == 0).all())


def test_output_not_cached():
    a = _inputs(1, 34, 40, seed=7, device="cpu", seq_lens=[2176])
    b = _inputs(1, 34, 40, seed=8, device="cpu", seq_lens=[2176])
    _roundtrip(a)
    _roundtrip(b)


# ----------------------------------------------------------------------------------------------
# Long-row path (long_rows.py), forced at small widths

def test_scores_match_reference(monkeypatch):
    # The scoring kernel's scratch row against the reference scores, token by token (items of
    # 2 pages, a partial last page, 2 histogram stripes).
    _force_plan(monkeypatch, False, 2, 2)
    inputs = _inputs(2, 36, 80, seed=9, device="cpu", seq_lens=[2300, 2113])
    out = torch.full((2, TOPK), 12345, dtype=torch.int32)
    scores = kernel._launch(**inputs, topk_indices=out)[0]
    q = inputs["q_index_fp8"].to(torch.float32)
    keys = reference.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    for b, seq_len in enumerate((2300, 2113)):
        ids = reference.row_token_ids(inputs["block_table"][b], seq_len, PS)
        want = reference.row_scores(q[b], keys, inputs["weights"][b], ids)
        torch.testing.assert_close(scores[b, :seq_len], want, atol=1e-3, rtol=1e-4)
    _check(inputs, out, BUILTIN.reference(**inputs))


@pytest.mark.parametrize("one_launch", [True, False])
def test_split_schedule(monkeypatch, one_launch):
    # Items of 2 pages (a row spread over several programs; programs past the call's items
    # return at once), 2 histogram stripes, 1024-token filter tiles (several filter programs
    # per row), uneven rows: seq_len 1, exactly topk, topk + 1, a partial last page, a full row.
    _force_plan(monkeypatch, one_launch, 2, 2)
    monkeypatch.setattr(long_rows, "_FILTER_TILE", 1024)
    monkeypatch.setattr(long_rows, "_ONE_LAUNCH_TILE", 1024)
    inputs = _inputs(6, 64, 400, seed=13, device="cpu", seq_lens=[1, 2048, 2049, 3333, 0, 4096])
    out = _roundtrip(inputs)
    assert bool((out[0, 1:] == -1).all()) and bool((out[4] == -1).all())


@pytest.mark.parametrize("batch", [1, 5, 9])
def test_batch_sizes(monkeypatch, batch):
    # The definition's own seq_lens (uniform below the width, one full row), two launches.
    _force_plan(monkeypatch, False, 4, 1)
    _roundtrip(_inputs(batch, 48, batch * 48 + 7, seed=40 + batch, device="cpu"))


def test_batch_over_workspace_rows(monkeypatch):
    # 66 rows: a 128-row work-list block and a workspace of more than the first 64 rows;
    # mostly pass-through rows, three scored ones among them.
    _force_path(monkeypatch, "long_rows")
    lens = [5 + (i % 7) * 300 for i in range(66)]
    lens[3], lens[40], lens[65] = 2100, 2176, 2049
    _roundtrip(_inputs(66, 34, 66 * 34, seed=15, device="cpu", seq_lens=lens))
    assert common._workspaces[("cpu", None)][-1].rows >= 66


def test_default_plan_one_launch(monkeypatch):
    # The default plan at a small width (3 rows of up to 64 pages: one launch).
    _force_path(monkeypatch, "long_rows")
    assert long_rows._plan(3, 64, PS, long_rows._CPU_SMS).one_launch
    _roundtrip(_inputs(3, 64, 200, seed=14, device="cpu", seq_lens=[4096, 2500, 1000]))


def test_plan_table():
    # H200 (132 SMs): serving-envelope and contest widths.
    resident = 132 * long_rows._PROGRAMS_PER_SM
    for batch in (1, 4, 15, 16, 30, 32, 64):
        for pages in (33, 40, 91, 128, 129, 256, 512, 1024, 2048):
            plan = long_rows._plan(batch, pages, PS, 132)
            ppi = plan.pages_per_item
            assert ppi & (ppi - 1) == 0 and ppi <= long_rows._MAX_PAGES_PER_ITEM
            expected_items = (batch + 1) // 2 * -(-pages // ppi)
            assert ppi == long_rows._MAX_PAGES_PER_ITEM or expected_items <= long_rows._ITEMS_PER_PROGRAM * resident
            assert ppi == 1 or 2 * expected_items > long_rows._ITEMS_PER_PROGRAM * resident
            assert plan.one_launch == (pages <= 128)
            assert 1 <= plan.stripes <= long_rows._MAX_STRIPES
    assert long_rows._plan(1, 2048, PS, 132) == long_rows._Plan(False, 4, 4)
    assert long_rows._plan(64, 256, PS, 132) == long_rows._Plan(False, 16, 1)
    assert long_rows._plan(30, 91, PS, 132) == long_rows._Plan(True, 4, 1)


@pytest.mark.parametrize("one_launch", [True, False])
def test_streamed_candidates_with_ties(monkeypatch, one_launch):
    # More candidates than the register tile (256): the streamed select.  Row 0: every score
    # equal; row 1: pages repeating 3 contents, so every score has ~20 exact copies and the
    # threshold falls inside a group of ties; row 2: plain random scores.
    _force_plan(monkeypatch, one_launch, 4, 1)
    monkeypatch.setattr(long_rows, "_CAND_TILE", 256)
    monkeypatch.setattr(long_rows, "_ONE_LAUNCH_TILE", 256)
    monkeypatch.setattr(long_rows, "_FILTER_TILE", 512)
    inputs = _inputs(3, 50, 160, seed=6, device="cpu", seq_lens=[3000, 3200, 2900])
    _roundtrip(_with_ties(inputs))


@pytest.mark.parametrize("small", [64, 256])
def test_candidate_select_block_widths(monkeypatch, small):
    # The candidate select's three ways, by the threshold bin's size n: a `small`-wide block
    # (n <= small), the _CAND_TILE-wide block (n <= 1024), the streamed search (more): the
    # all-equal row takes the streamed one, the tied and random rows the two resident ones.
    _force_plan(monkeypatch, False, 4, 1)
    monkeypatch.setattr(long_rows, "_CAND_TILE", 1024)
    monkeypatch.setattr(long_rows, "_SMALL_CAND_TILE", long_rows.tl.constexpr(small))
    inputs = _inputs(3, 50, 160, seed=11, device="cpu", seq_lens=[3000, 3200, 2900])
    _roundtrip(_with_ties(inputs))


def test_repeated_calls_reuse_workspace(monkeypatch):
    # The persistent workspace across calls of different shapes and plans (each call must
    # leave it zeroed for the next).
    for seed, (one_launch, stripes) in enumerate([(False, 4), (True, 1), (False, 2)]):
        _force_plan(monkeypatch, one_launch, 2, stripes)
        _roundtrip(_inputs(2, 34 + seed, 120, seed=30 + seed, device="cpu",
                           seq_lens=[2176 + seed, 2100]))


# ----------------------------------------------------------------------------------------------
# GPU (H200): contest shapes, serving-envelope rows (each path forced too) and the launch cache.

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
@pytest.mark.parametrize("batch,max_pages", [(4, 256), (64, 96), (2, 300), (1, 2048), (4, 1024),
                                             (64, 256), (16, 512)])
@pytest.mark.parametrize("path", (None,) + PATHS)
def test_gpu_envelope_rows(monkeypatch, batch, max_pages, path):
    # Widths up to 128K tokens (one row of each batch spans the whole width), through the
    # shipped dispatch and through each path forced.
    _force_path(monkeypatch, path)
    inputs = _inputs(batch, max_pages, max(11923, batch * max_pages), seed=12 + batch, device="cuda")
    _roundtrip(inputs)


@pytest.mark.gpu
def test_gpu_long_rows_with_ties():
    # 64K-token rows: one all-equal (weights 0: every token a candidate, the streamed select),
    # one with page contents repeating every 5 pages, a short one and an exactly-topk one.
    inputs = _inputs(4, 1024, 4096, seed=21, device="cuda", seq_lens=[65536, 60001, 700, 2048])
    inputs["weights"][0] = 0.0
    cache = inputs["k_index_cache_fp8"]
    pages = inputs["block_table"][1].to(torch.long)
    cache[pages[5:]] = cache[pages[torch.arange(5, pages.numel(), device="cuda") % 5]].clone()
    _roundtrip(inputs)


@pytest.mark.gpu
def test_gpu_timing_report():
    """Not a check: prints microseconds per call for a few shapes, back-to-back calls of ``run``
    (its launch cache: host overhead included) and one call replayed from a CUDA graph."""
    iters = 50
    for batch, max_pages in [(1, 20), (31, 20), (1, 45), (16, 45), (1, 91), (31, 91), (4, 256),
                             (64, 96), (1, 2048), (64, 256)]:
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
@pytest.mark.parametrize("max_pages", [45, 512])
def test_gpu_launch_cache(monkeypatch, mode, max_pages):
    """The in-solution launch cache (CUDA graph or recorded direct launches), the short-row (45
    pages) and the long-row (512 pages, two launches) path: two buffer sets used alternately with new contents
    every call (each output checked), then the call captured inside a caller's graph and that
    graph replayed on new contents."""
    monkeypatch.setattr(kernel, "LAUNCH", mode)
    kernel._entries.clear()
    num_pages = max(11923, 8 * max_pages)
    sets = [_inputs(8, max_pages, num_pages, seed=40 + i, device="cuda") for i in range(2)]
    outs = [torch.empty((8, TOPK), dtype=torch.int32, device="cuda") for _ in range(2)]
    for it in range(6):
        s = it % 2
        fresh = _inputs(8, max_pages, num_pages, seed=50 + it, device="cuda")
        for name in ("q_index_fp8", "weights", "seq_lens", "block_table"):
            sets[s][name].copy_(fresh[name])
        outs[s].fill_(12345)
        kernel.run(**sets[s], topk_indices=outs[s])
        _check(sets[s], outs[s], BUILTIN.reference(**sets[s]))
    assert len(kernel._entries) == 2 and all(kernel._entries.values())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel.run(**sets[0], topk_indices=outs[0])
    fresh = _inputs(8, max_pages, num_pages, seed=60, device="cuda")
    for name in ("q_index_fp8", "weights", "seq_lens", "block_table"):
        sets[0][name].copy_(fresh[name])
    outs[0].fill_(12345)
    graph.replay()
    torch.cuda.synchronize()
    _check(sets[0], outs[0], BUILTIN.reference(**sets[0]))
    _assert_workspace_clean("cuda")
