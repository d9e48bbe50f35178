"""GEMM1 with its SwiGLU/FP8 epilogue in Gluon (config key G1_GLUON on the TMA path; CUDA only).

Why Gluon, not Triton: Triton 3.6 compiles the block-scaled loop ``acc += dot(a, b) * scale`` to
``wgmma.wait_group 0`` after every 128-K block, so the tensor cores idle during each promotion.
Gluon exposes the wgmma wait: here the two MMAs (up, gate) of K block k run while block k-1 is
promoted (two product sets used in turn).  The K loop is a runtime loop over groups of GROUP
blocks with nothing in flight across its back edge: fully unrolled, the same tile was 3.7-8.2x
slower (code size; results/h200/2026-11-30-v7/probe).

Registers decide the tile.  Up and gate accumulators plus two product sets are six fp32 tiles;
at 128 x 128 on 16 warps (Triton's shipped tile) that is 192 registers a thread against a cap of
128.  So each program computes its 128 output columns as two 64-column halves on 8 warps (two
warpgroups stacked along M; about 220 registers): the first half's C waits in shared memory as
fp32 until the second half is done, then both are quantised with one scale per row per 128
columns, the same C and scale layout as the Triton GEMM1 (QG = 128), so GEMM2 is unchanged.  The
two halves form one continuous stream of 2 x H/128 K blocks, so the TMA pipeline does not drain
between them.  As a dense probe (scripts/gluon_swiglu_probe.py, results/h200/2026-11-30-v8/probe)
the 64-column tile ran at 720 / 661 TFLOP/s at M = 8192 / 16384 against 611 / 581 for Triton's.

One program per bounded (M-block, N-block) in gemm._tile_of's grouped order; unused M-blocks exit.
Gluon has no interpreter: the CPU tests compile this kernel for sm_90a (registers, spills, waits).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait



@gluon.jit
def _issue(a_bufs, b_bufs, ready, kk, p_up, p_gate, NUM_STAGES: gl.constexpr):
    """Wait for stream block kk's tiles and start its two MMAs into dead product registers."""
    s = kk % NUM_STAGES
    mbarrier.wait(ready.index(s), phase=(kk // NUM_STAGES) & 1)
    p_up = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s).permute((1, 0)), p_up, use_acc=False, is_async=True)
    p_gate = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s + 1).permute((1, 0)), p_gate, use_acc=False,
                           is_async=True)
    return p_up, p_gate


@gluon.jit
def _promote(acc_up, acc_gate, p_up, p_gate, a_scale_ptr, s_up, s_gate, rows, R, k):
    """The fp32 promotion of K block k: acc += product x a_scale[k, row] x w_scale[k] (padding rows
    carry scale 0 from the gather)."""
    a_s = gl.load(a_scale_ptr + k * R + rows)
    return (acc_up + p_up * (a_s * gl.load(s_up + k))[:, None],
            acc_gate + p_gate * (a_s * gl.load(s_gate + k))[:, None])


@gluon.jit
def _load(a_desc, w_desc, a_bufs, b_bufs, ready, kk, KB: gl.constexpr, off_m, w_up, I: gl.constexpr,
          nbytes: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Load stream block kk (if any) into its stage: half kk // KB, K block kk % KB; the A tile and
    the half's up and gate rows of W13."""
    if kk < 2 * KB:
        s = kk % NUM_STAGES
        k = kk % KB
        w_row = w_up + (kk // KB) * 64
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, k * 128], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(w_desc, [w_row, k * 128], ready.index(s), b_bufs.index(2 * s))
        tma.async_copy_global_to_shared(w_desc, [w_row + I, k * 128], ready.index(s), b_bufs.index(2 * s + 1))


@gluon.jit
def _half(a_desc, w_desc, a_bufs, b_bufs, ready, half: gl.constexpr, a_scale_ptr, s_up, s_gate, rows, R, off_m,
          w_up, I: gl.constexpr, KB: gl.constexpr, nbytes: gl.constexpr, NUM_STAGES: gl.constexpr,
          GROUP: gl.constexpr, mma_layout: gl.constexpr, BLOCK_M: gl.constexpr):
    """silu(gate) * up of one 64-column half, fp32 [BLOCK_M, 64]: the K blocks of stream positions
    half * KB ... half * KB + KB - 1, in groups of GROUP with one block's MMAs in flight."""
    acc_up = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    acc_gate = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    p0u = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    p0g = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    p1u = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    p1g = gl.zeros([BLOCK_M, 64], gl.float32, layout=mma_layout)
    base = half * KB
    for g in range(0, KB, GROUP):
        p0u, p0g = _issue(a_bufs, b_bufs, ready, base + g, p0u, p0g, NUM_STAGES)
        for j in gl.static_range(1, GROUP):
            if j % 2 == 1:
                p1u, p1g = _issue(a_bufs, b_bufs, ready, base + g + j, p1u, p1g, NUM_STAGES)
                p0u, p0g = warpgroup_mma_wait(num_outstanding=2, deps=(p0u, p0g))
                acc_up, acc_gate = _promote(acc_up, acc_gate, p0u, p0g, a_scale_ptr, s_up, s_gate, rows, R,
                                            g + j - 1)
            else:
                p0u, p0g = _issue(a_bufs, b_bufs, ready, base + g + j, p0u, p0g, NUM_STAGES)
                p1u, p1g = warpgroup_mma_wait(num_outstanding=2, deps=(p1u, p1g))
                acc_up, acc_gate = _promote(acc_up, acc_gate, p1u, p1g, a_scale_ptr, s_up, s_gate, rows, R,
                                            g + j - 1)
            _load(a_desc, w_desc, a_bufs, b_bufs, ready, base + g + j - 1 + NUM_STAGES, KB, off_m, w_up, I,
                  nbytes, NUM_STAGES)
        if (GROUP - 1) % 2 == 1:
            p1u, p1g = warpgroup_mma_wait(num_outstanding=0, deps=(p1u, p1g))
            acc_up, acc_gate = _promote(acc_up, acc_gate, p1u, p1g, a_scale_ptr, s_up, s_gate, rows, R,
                                        g + GROUP - 1)
        else:
            p0u, p0g = warpgroup_mma_wait(num_outstanding=0, deps=(p0u, p0g))
            acc_up, acc_gate = _promote(acc_up, acc_gate, p0u, p0g, a_scale_ptr, s_up, s_gate, rows, R,
                                        g + GROUP - 1)
        _load(a_desc, w_desc, a_bufs, b_bufs, ready, base + g + GROUP - 1 + NUM_STAGES, KB, off_m, w_up, I,
              nbytes, NUM_STAGES)
    return acc_gate / (1.0 + gl.exp(-acc_gate)) * acc_up


@gluon.jit
def _gemm1_gluon_kernel(a_desc, a_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, c_ptr,
                        c_scale_ptr, R, H: gl.constexpr, I: gl.constexpr, BLOCK_M: gl.constexpr,
                        NUM_STAGES: gl.constexpr, GROUP: gl.constexpr, GROUP_M: gl.constexpr,
                        FP8_MAX_C: gl.constexpr, num_warps: gl.constexpr):
    """C[rows, n0:n0+128] = silu(A W13[e, I+n]^T) * (A W13[e, n]^T) in FP8 with one scale per row
    per 128 columns, for one (M-block, N-block) in gemm._tile_of's grouped order (GROUP_M M-blocks
    sweep the N-blocks together, so an expert's weight rows and the group's A tiles are reused
    from L2).  a_desc: A_sorted [R, H] fp8, block [BLOCK_M, 128]; a_scale [H/128, R] fp32 in row
    order (the gather's, config key A_SCALE_SORTED); w_desc: W13 as [E*2I, H] fp8, block [64, 128];
    w_scale [E, 2I/128, H/128] fp32; c [R, I] fp8 e4m3 and c_scale [I/128, R] fp32, valid rows only
    (gemm._swiglu_quant_store's layout and rounding).  H / 128 must be a multiple of GROUP;
    num_warps = BLOCK_M / 16 (one warpgroup per 64 rows)."""
    NUM_N: gl.constexpr = I // 128
    pid = gl.program_id(0)
    width = GROUP_M * NUM_N
    first_m = (pid // width) * GROUP_M
    gsize = gl.minimum(R // BLOCK_M - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    expert = gl.load(block_expert_ptr + pid_m)
    if expert >= 0:
        KB: gl.constexpr = H // 128
        off_m = pid_m * BLOCK_M
        w_up = expert * (2 * I) + pid_n * 128
        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, 64, 32])
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(w_desc.dtype, [2 * NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
        first = gl.allocate_shared_memory(gl.float32, [BLOCK_M, 64],
                                          gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
        ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(ready.index(i), count=1)
        nbytes: gl.constexpr = a_desc.block_type.nbytes + 2 * w_desc.block_type.nbytes
        for i in gl.static_range(NUM_STAGES):
            _load(a_desc, w_desc, a_bufs, b_bufs, ready, i, KB, off_m, w_up, I, nbytes, NUM_STAGES)

        rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma_layout))
        ws_base = w_scale_ptr + expert * ((2 * I // 128) * KB)
        s_up = ws_base + pid_n * KB                 # both halves lie in the same 128-row scale block
        s_gate = ws_base + (I // 128 + pid_n) * KB
        c0 = _half(a_desc, w_desc, a_bufs, b_bufs, ready, 0, a_scale_ptr, s_up, s_gate, rows, R, off_m, w_up, I,
                   KB, nbytes, NUM_STAGES, GROUP, mma_layout, BLOCK_M)
        amax = gl.max(gl.abs(c0), axis=1)
        first.store(c0)
        c1 = _half(a_desc, w_desc, a_bufs, b_bufs, ready, 1, a_scale_ptr, s_up, s_gate, rows, R, off_m, w_up, I,
                   KB, nbytes, NUM_STAGES, GROUP, mma_layout, BLOCK_M)
        for i in gl.static_range(NUM_STAGES):
            mbarrier.invalidate(ready.index(i))

        amax = gl.maximum(amax, gl.max(gl.abs(c1), axis=1))
        scale = gl.where(amax > 0.0, amax / FP8_MAX_C, 1.0)
        row_ok = rows - off_m < gl.load(block_rows_ptr + pid_m)
        cols = pid_n * 128 + gl.arange(0, 64, layout=gl.SliceLayout(0, mma_layout))
        c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * I + cols[None, :]
        c0 = first.load(mma_layout)
        q0 = gl.minimum(gl.maximum(c0 / scale[:, None], -FP8_MAX_C), FP8_MAX_C)
        gl.store(c_ptrs, q0.to(c_ptr.dtype.element_ty), mask=row_ok[:, None])
        q1 = gl.minimum(gl.maximum(c1 / scale[:, None], -FP8_MAX_C), FP8_MAX_C)
        gl.store(c_ptrs + 64, q1.to(c_ptr.dtype.element_ty), mask=row_ok[:, None])
        gl.store(c_scale_ptr + pid_n * R + rows, scale, mask=row_ok)
