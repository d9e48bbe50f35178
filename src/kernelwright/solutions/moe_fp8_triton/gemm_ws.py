"""The two grouped GEMMs warp-specialised in Gluon (config keys G1_WS and G2_WS on the TMA path;
CUDA sm_90 only).  GEMM1 (with its SwiGLU/FP8 epilogue) writes the same C and scales as
gemm_tma._gemm1_tma_kernel, and GEMM2 the same bf16 rows of y as gemm_tma._gemm2_tma_kernel, so each
can replace its Triton kernel alone.  GEMM1 is described first; GEMM2 (at the end) has the same
structure with one accumulator, which leaves room for a second product set.

Why not Triton: Triton 3.6 compiles the block-scaled loop ``acc += dot(a, b) * scale`` with all
warps both loading and multiplying, and waits for every 128-K block's wgmma before its promotion,
so the tensor cores idle during each promotion.  Here the roles are split the way DeepGEMM's FP8
GEMMs split them (deepseek-ai/DeepGEMM, "fp8_gemm" kernels for sm_90):

* a producer warpgroup (4 warps, ``setmaxnreg`` down to PRODUCER_REGS) issues the TMA loads of each
  K block (the A tile and the tile's up and gate rows of W13) into a ring of NUM_STAGES stages;
* two consumer warpgroups (the default partition, 8 warps) take the rest of the register file
  (launch with ``maxnreg`` = MAXNREG; 232-240 registers each after ``setmaxnreg``), each on its own
  64 rows of the 128 x 128 tile, holding the up and gate accumulators (64 + 64 registers) and one
  64-register product.  Per K block: up MMA, wait, promote; gate MMA, wait, release the stage,
  promote.  A warpgroup never has two MMAs in flight; the tensor cores stay busy because the other
  warpgroup's MMAs and the producer's loads overlap each warpgroup's promotion.

The gate MMA's accumulator operand (unread: ``use_acc=False``) is ``acc_up * 0.0``: that makes the
gate MMA depend on the promoted ``acc_up``, so ptxas cannot overlap it with the up promotion and
keep two products alive (without it the probe's first form spilled 464 bytes).

As a dense probe (experiments/gluon_swiglu_probe.py, ``gluon-ws-n128-s4``) this tile ran at
916 / 727 TFLOP/s at M = 8192 / 16384 against 607 / 567 for Triton's 128 x 128 tile in the same
call.  In the MoE, against the Triton kernels (grouped and persistent already), CUPTI at T = 11948
and 14107 reads GEMM1 7 % and GEMM2 15 % faster (docs/history/moe.md).

Persistent: at most one program per SM (the 4-stage ring takes 192 KB of shared memory); both
partitions walk the same tiles (every used M-block, counted on the device from the expert counts,
times I / 128 N-blocks) in gemm._tile_of's grouped order, with one stage counter that runs on
across tiles, so the producer fills the next tile's stages during the current tile's epilogue.
Gluon has no interpreter: the CPU tests compile these kernels for sm_90a (registers, spills); the
GPU tests compare them with the Triton kernels and the reference.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

PRODUCER_REGS = 40   # the producer warpgroup's registers after setmaxnreg (it only issues TMA)
MAXNREG = 168        # launch cap: 12 warps x 32 threads x 168 <= 64 K registers; setmaxnreg then
                     # moves the producer's share to the two consumer warpgroups
BLOCK = gl.constexpr(128)   # the tile (BLOCK_M = BLOCK_N = the scale block): one C scale per row and tile


@gluon.jit
def _tile_of(tile, used, NUM_N: gl.constexpr, GROUP_M: gl.constexpr):
    """Tile index -> (M-block, N-block) in gemm._tile_of's order over ``used`` M-blocks: groups of
    GROUP_M M-blocks sweep the N-blocks together, M fastest inside a group."""
    width = GROUP_M * NUM_N
    first_m = (tile // width) * GROUP_M
    gsize = gl.minimum(used - first_m, GROUP_M)
    return first_m + (tile % width) % gsize, (tile % width) // gsize


@gluon.jit
def _used_m_blocks(counts_ptr, NUM_LOCAL: gl.constexpr, NUM_LOCAL_P2: gl.constexpr, num_warps: gl.constexpr):
    """The 128-row M-blocks the align kernel fills (they come first): sum over experts of
    ceil(count / 128), from the expert counts [NUM_LOCAL] int32 (gemm._used_m_blocks in Gluon)."""
    e = gl.arange(0, NUM_LOCAL_P2, layout=gl.BlockedLayout([1], [32], [num_warps], [0]))
    cnt = gl.load(counts_ptr + e, mask=e < NUM_LOCAL, other=0)
    return gl.sum((cnt + BLOCK - 1) // BLOCK, axis=0)


@gluon.jit
def _stage_barriers(NUM_STAGES: gl.constexpr):
    """(ready, empty): one mbarrier per ring stage each, count 1.  The producer's TMA completes
    ready[s]; the consumers arrive on empty[s] once the stage's MMAs are done."""
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    return ready, empty


@gluon.jit
def _producer(a_desc, w_desc, a_bufs, b_bufs, ready, empty, block_expert_ptr, used,
              I: gl.constexpr, KB: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Worker partition: per tile and K block, wait until the consumers released the stage (the
    empty barriers start in phase 1 complete, so the first round passes), then TMA the A tile and
    the tile's up rows [e*2I + n0, +128) and gate rows [e*2I + I + n0, +128) of W13."""
    NUM_N: gl.constexpr = I // BLOCK
    nbytes: gl.constexpr = a_desc.block_type.nbytes + 2 * w_desc.block_type.nbytes
    it = 0
    for tile in range(gl.program_id(0), used * NUM_N, gl.num_programs(0)):
        pid_m, pid_n = _tile_of(tile, used, NUM_N, GROUP_M)
        off_m = pid_m * BLOCK
        w_up = gl.load(block_expert_ptr + pid_m) * (2 * I) + pid_n * BLOCK
        for k in range(KB):
            s = it % NUM_STAGES
            mbarrier.wait(empty.index(s), ((it // NUM_STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, k * BLOCK], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(w_desc, [w_up, k * BLOCK], ready.index(s), b_bufs.index(2 * s))
            tma.async_copy_global_to_shared(w_desc, [w_up + I, k * BLOCK], ready.index(s), b_bufs.index(2 * s + 1))
            it += 1


@gluon.jit
def _consumer(a_bufs, b_bufs, ready, empty, a_scale_ptr, w_scale_ptr, block_expert_ptr, block_rows_ptr, c_ptr,
              c_scale_ptr, used, R, I: gl.constexpr, KB: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_STAGES: gl.constexpr, FP8_MAX_C: gl.constexpr):
    """Default partition (two consumer warpgroups, 64 rows each): the K loop described in the
    module docstring, then C = silu(gate) * up quantised to FP8 with one scale per row (amax / 448),
    stored at the tile's valid rows with its scale."""
    NUM_N: gl.constexpr = I // BLOCK
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BLOCK, 32])
    it = 0
    for tile in range(gl.program_id(0), used * NUM_N, gl.num_programs(0)):
        pid_m, pid_n = _tile_of(tile, used, NUM_N, GROUP_M)
        rows = pid_m * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, mma_layout))
        ws_base = w_scale_ptr + gl.load(block_expert_ptr + pid_m) * ((2 * I // BLOCK) * KB)
        s_up = ws_base + pid_n * KB
        s_gate = ws_base + (I // BLOCK + pid_n) * KB
        acc_up = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        acc_gate = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        prod = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        for k in range(KB):
            s = it % NUM_STAGES
            mbarrier.wait(ready.index(s), (it // NUM_STAGES) & 1)
            a_s = gl.load(a_scale_ptr + k * R + rows)      # padding rows: 0 (the gather's)
            prod = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s).permute((1, 0)), prod, use_acc=False,
                                 is_async=True)
            prod = warpgroup_mma_wait(num_outstanding=0, deps=(prod,))
            acc_up = acc_up + prod * (a_s * gl.load(s_up + k))[:, None]
            prod = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s + 1).permute((1, 0)), acc_up * 0.0,
                                 use_acc=False, is_async=True)
            prod = warpgroup_mma_wait(num_outstanding=0, deps=(prod,))
            mbarrier.arrive(empty.index(s), count=1)
            acc_gate = acc_gate + prod * (a_s * gl.load(s_gate + k))[:, None]
            it += 1
        c = acc_gate / (1.0 + gl.exp(-acc_gate)) * acc_up
        amax = gl.max(gl.abs(c), axis=1)
        scale = gl.where(amax > 0.0, amax / FP8_MAX_C, 1.0)
        q = gl.minimum(gl.maximum(c / scale[:, None], -FP8_MAX_C), FP8_MAX_C)
        row_ok = rows - pid_m * BLOCK < gl.load(block_rows_ptr + pid_m)
        cols = pid_n * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(0, mma_layout))
        gl.store(c_ptr + rows.to(gl.int64)[:, None] * I + cols[None, :], q.to(c_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
        gl.store(c_scale_ptr + pid_n * R + rows, scale, mask=row_ok)


@gluon.jit
def _gemm1_ws_kernel(a_desc, a_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, counts_ptr, c_ptr,
                     c_scale_ptr, R, H: gl.constexpr, I: gl.constexpr, NUM_STAGES: gl.constexpr,
                     GROUP_M: gl.constexpr, NUM_LOCAL: gl.constexpr, NUM_LOCAL_P2: gl.constexpr,
                     FP8_MAX_C: gl.constexpr, WORKER_REGS: gl.constexpr, num_warps: gl.constexpr):
    """C[rows, n0:n0+128] = silu(A W13[e, I+n]^T) * (A W13[e, n]^T) in FP8, scale per row per 128
    columns, for every used (M-block, N-block).  a_desc: A_sorted [R, H] fp8 e4m3, block [128, 128];
    a_scale [H/128, R] fp32 in row order (the gather's, config key A_SCALE_SORTED; 0 in padding
    rows); w_desc: W13 as [E*2I, H] fp8, block [128, 128]; w_scale [E, 2I/128, H/128] fp32;
    block_expert / block_rows [MB] int32 (the align kernel's); counts [NUM_LOCAL] int32; c [R, I]
    fp8 e4m3 and c_scale [I/128, R] fp32, valid rows only.  num_warps = 8 (the consumers);
    WORKER_REGS = PRODUCER_REGS; launch with maxnreg = MAXNREG and at most one program per SM."""
    KB: gl.constexpr = H // BLOCK
    used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, num_warps)
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [2 * NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready, empty = _stage_barriers(NUM_STAGES)
    gl.warp_specialize([
        (_consumer, (a_bufs, b_bufs, ready, empty, a_scale_ptr, w_scale_ptr, block_expert_ptr, block_rows_ptr, c_ptr,
                     c_scale_ptr, used, R, I, KB, GROUP_M, NUM_STAGES, FP8_MAX_C)),
        (_producer, (a_desc, w_desc, a_bufs, b_bufs, ready, empty, block_expert_ptr, used, I, KB, GROUP_M,
                     NUM_STAGES)),
    ], [4], [WORKER_REGS])


# ------------------------------------------------------------------------------------------ GEMM2
@gluon.jit
def _g2_producer(c_desc, w_desc, c_bufs, w_bufs, ready, empty, block_expert_ptr, used,
                 H: gl.constexpr, KB: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Worker partition of GEMM2: per tile and K block (one C quantisation group), the C tile
    [128 rows, 128] and the W2 tile [128 columns of H, 128] of the M-block's expert."""
    NUM_N: gl.constexpr = H // BLOCK
    nbytes: gl.constexpr = c_desc.block_type.nbytes + w_desc.block_type.nbytes
    it = 0
    for tile in range(gl.program_id(0), used * NUM_N, gl.num_programs(0)):
        pid_m, pid_n = _tile_of(tile, used, NUM_N, GROUP_M)
        off_m = pid_m * BLOCK
        w_row = gl.load(block_expert_ptr + pid_m) * H + pid_n * BLOCK
        for k in range(KB):
            s = it % NUM_STAGES
            mbarrier.wait(empty.index(s), ((it // NUM_STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(c_desc, [off_m, k * BLOCK], ready.index(s), c_bufs.index(s))
            tma.async_copy_global_to_shared(w_desc, [w_row, k * BLOCK], ready.index(s), w_bufs.index(s))
            it += 1


@gluon.jit
def _g2_issue(c_bufs, w_bufs, ready, i, prod, NUM_STAGES: gl.constexpr):
    """Wait for ring position i's tiles, then start its MMA into the dead product ``prod``."""
    s = i % NUM_STAGES
    mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
    return warpgroup_mma(c_bufs.index(s), w_bufs.index(s).permute((1, 0)), prod, use_acc=False, is_async=True)


@gluon.jit
def _g2_retire(acc, prod, empty, i, c_scale_ptr, w_s_ptr, rows, R, k, NUM_STAGES: gl.constexpr):
    """Ring position i (K block k) has been multiplied: release its stage, then promote,
    acc += prod x c_scale[k, row] x w_scale[k] (one W2 scale per K block: the tile is one 128-column
    scale block wide)."""
    mbarrier.arrive(empty.index(i % NUM_STAGES), count=1)
    return acc + prod * (gl.load(c_scale_ptr + k * R + rows) * gl.load(w_s_ptr + k))[:, None]


@gluon.jit
def _g2_consumer(c_bufs, w_bufs, ready, empty, c_scale_ptr, w_scale_ptr, block_expert_ptr, block_rows_ptr, y_ptr,
                 used, R, H: gl.constexpr, KB: gl.constexpr, GROUP_M: gl.constexpr, NUM_STAGES: gl.constexpr,
                 GROUP: gl.constexpr):
    """Default partition of GEMM2 (two consumer warpgroups, 64 rows each).  Two product sets, so
    each warpgroup keeps one MMA in flight while it promotes the previous K block (GEMM1 cannot: its
    up and gate accumulators leave room for one product only).  The K loop is a runtime loop over
    groups of GROUP K blocks (KB a multiple of GROUP), unrolled inside, with nothing in flight across
    its back edge: GROUP - 1 of every GROUP promotions overlap an MMA (fully unrolled, Gluon tiles
    are 3.7-8.2x slower from code size: docs/history/moe.md).  The bf16 tile goes through shared
    memory (convert_layout) so each thread stores 16 contiguous bytes."""
    NUM_N: gl.constexpr = H // BLOCK
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BLOCK, 32])
    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [gl.num_warps(), 1], [1, 0])
    it = 0
    for tile in range(gl.program_id(0), used * NUM_N, gl.num_programs(0)):
        pid_m, pid_n = _tile_of(tile, used, NUM_N, GROUP_M)
        rows = pid_m * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, mma_layout))
        w_s_ptr = w_scale_ptr + gl.load(block_expert_ptr + pid_m) * ((H // BLOCK) * KB) + pid_n * KB
        acc = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        p0 = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        p1 = gl.zeros([BLOCK, BLOCK], gl.float32, layout=mma_layout)
        for g in range(0, KB, GROUP):
            p0 = _g2_issue(c_bufs, w_bufs, ready, it + g, p0, NUM_STAGES)
            for j in gl.static_range(1, GROUP):
                if j % 2 == 1:
                    # after the group's first promotion, a new MMA's (unread) accumulator operand is
                    # acc * 0.0, which orders it after that promotion: left free, ptxas overlaps them
                    # and keeps three products alive (408 bytes of spills at GROUP 4, CPU compile)
                    p1 = _g2_issue(c_bufs, w_bufs, ready, it + g + j, p1 if j == 1 else acc * 0.0, NUM_STAGES)
                    p0 = warpgroup_mma_wait(num_outstanding=1, deps=(p0,))
                    acc = _g2_retire(acc, p0, empty, it + g + j - 1, c_scale_ptr, w_s_ptr, rows, R, g + j - 1,
                                     NUM_STAGES)
                else:
                    p0 = _g2_issue(c_bufs, w_bufs, ready, it + g + j, acc * 0.0, NUM_STAGES)
                    p1 = warpgroup_mma_wait(num_outstanding=1, deps=(p1,))
                    acc = _g2_retire(acc, p1, empty, it + g + j - 1, c_scale_ptr, w_s_ptr, rows, R, g + j - 1,
                                     NUM_STAGES)
            if (GROUP - 1) % 2 == 1:
                p1 = warpgroup_mma_wait(num_outstanding=0, deps=(p1,))
                acc = _g2_retire(acc, p1, empty, it + g + GROUP - 1, c_scale_ptr, w_s_ptr, rows, R, g + GROUP - 1,
                                 NUM_STAGES)
            else:
                p0 = warpgroup_mma_wait(num_outstanding=0, deps=(p0,))
                acc = _g2_retire(acc, p0, empty, it + g + GROUP - 1, c_scale_ptr, w_s_ptr, rows, R, g + GROUP - 1,
                                 NUM_STAGES)
        it += KB
        out = gl.convert_layout(acc.to(y_ptr.dtype.element_ty), store_layout)
        srows = pid_m * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, store_layout))
        cols = pid_n * BLOCK + gl.arange(0, BLOCK, layout=gl.SliceLayout(0, store_layout))
        row_ok = srows - pid_m * BLOCK < gl.load(block_rows_ptr + pid_m)
        gl.store(y_ptr + srows.to(gl.int64)[:, None] * H + cols[None, :], out, mask=row_ok[:, None])


@gluon.jit
def _gemm2_ws_kernel(c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, counts_ptr, y_ptr,
                     R, H: gl.constexpr, I: gl.constexpr, NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                     NUM_LOCAL: gl.constexpr, NUM_LOCAL_P2: gl.constexpr, GROUP: gl.constexpr,
                     WORKER_REGS: gl.constexpr, num_warps: gl.constexpr):
    """O = C W2[e]^T as bf16 rows of y [R, H] at the valid rows, for every used (M-block, N-block of
    128 columns of H), warp-specialised as GEMM1 above.  c_desc: C [R, I] fp8 e4m3, block [128, 128];
    c_scale [I/128, R] fp32 (GEMM1's, QG = 128); w_desc: W2 as [E*H, I] fp8, block [128, 128];
    w_scale [E, H/128, I/128] fp32; block_expert / block_rows [MB] int32; counts [NUM_LOCAL] int32;
    y [R, H] bf16.  I / 128 must be a multiple of GROUP (K blocks per unrolled group).  num_warps = 8; WORKER_REGS = PRODUCER_REGS; launch with
    maxnreg = MAXNREG and at most one program per SM."""
    KB: gl.constexpr = I // BLOCK
    used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, num_warps)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [NUM_STAGES] + c_desc.block_type.shape, c_desc.layout)
    w_bufs = gl.allocate_shared_memory(w_desc.dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready, empty = _stage_barriers(NUM_STAGES)
    gl.warp_specialize([
        (_g2_consumer, (c_bufs, w_bufs, ready, empty, c_scale_ptr, w_scale_ptr, block_expert_ptr, block_rows_ptr,
                        y_ptr, used, R, H, KB, GROUP_M, NUM_STAGES, GROUP)),
        (_g2_producer, (c_desc, w_desc, c_bufs, w_bufs, ready, empty, block_expert_ptr, used, H, KB, GROUP_M,
                        NUM_STAGES)),
    ], [4], [WORKER_REGS])
