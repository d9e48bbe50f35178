"""GEMM1 without its epilogue in Gluon (config keys G1_UNFUSED + G1_GLUON; CUDA only).

Why Gluon, not Triton: Triton 3.6 compiles the block-scaled loop ``acc += dot(a, b) * scale`` to
``wgmma.wait_group 0`` after every 128-K block, so the tensor cores idle during each promotion.
Gluon exposes the wgmma wait: here the MMA of K block k runs while block k-1 is promoted (two
product registers used in turn).  The K loop is a runtime loop over groups of GROUP blocks with
nothing in flight across its back edge: fully unrolled, the same tile was 3.7-8.2x slower (code
size), and a product in flight across a runtime back edge makes ptxas serialise every wgmma
(results/h200/2026-11-30-v7/probe: the dense tile at the GEMM1 shape, 809 TFLOP/s against 724
for Triton's).  The tile has one accumulator (up and gate columns alike): with two, one product
in flight no longer fits in registers.  gemm_tma._swiglu_quant_kernel applies the SwiGLU/FP8
epilogue afterwards.

Same contract as gemm_tma._gemm1_plain_tma_kernel (its Triton form, which the CPU tests run:
Gluon has no interpreter), without the persistent loop: one program per bounded (M-block,
N-block) in the same grouped order, unused M-blocks exit.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _issue(a_bufs, b_bufs, ready, k, prod, NUM_STAGES: gl.constexpr):
    """Wait for K block k's tiles and start its MMA into ``prod`` (whose old value is dead)."""
    s = k % NUM_STAGES
    mbarrier.wait(ready.index(s), phase=(k // NUM_STAGES) & 1)
    return warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), prod, use_acc=False, is_async=True)


@gluon.jit
def _promote(acc, prod, a_scale_ptr, w_scales, rows, R, k):
    """acc += prod * a_scale[k, row] * w_scale[k]: the fp32 promotion of K block k (padding rows
    carry scale 0 from the gather)."""
    return acc + prod * (gl.load(a_scale_ptr + k * R + rows) * gl.load(w_scales + k))[:, None]


@gluon.jit
def _load(a_desc, w_desc, a_bufs, b_bufs, ready, k, KB: gl.constexpr, off_m, off_w, nbytes: gl.constexpr,
          NUM_STAGES: gl.constexpr):
    """Load K block k (if any) into its stage through TMA."""
    if k < KB:
        s = k % NUM_STAGES
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, k * 128], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(w_desc, [off_w, k * 128], ready.index(s), b_bufs.index(s))


@gluon.jit
def _gemm1_gluon_kernel(a_desc, a_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, y_ptr, R,
                        H: gl.constexpr, N2: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                        NUM_STAGES: gl.constexpr, GROUP: gl.constexpr, GROUP_M: gl.constexpr,
                        num_warps: gl.constexpr):
    """Y1[rows, n0:n0+BLOCK_N] = A_sorted W13[e]^T (bf16), one program per (M-block, N-block) in
    gemm._tile_of's grouped order (GROUP_M M-blocks sweep the N-blocks together, so an expert's
    weight tile and the group's A tiles are reused from L2).  a_desc: A_sorted [R, H] fp8, block
    [BLOCK_M, 128]; a_scale [H/128, R]; w_desc: W13 as [E*2I, H] fp8, block [BLOCK_N, 128]
    (BLOCK_N = 128: one weight scale per tile); w_scale [E, 2I/128, H/128]; y [R, N2] bf16.
    H / 128 must be a multiple of GROUP.  num_warps = 8: two warpgroups stacked along M."""
    NUM_N: gl.constexpr = N2 // BLOCK_N
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
        off_w = expert * N2 + pid_n * BLOCK_N
        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 32])
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(w_desc.dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(ready.index(i), count=1)
        nbytes: gl.constexpr = a_desc.block_type.nbytes + w_desc.block_type.nbytes
        for i in gl.static_range(NUM_STAGES):
            _load(a_desc, w_desc, a_bufs, b_bufs, ready, i, KB, off_m, off_w, nbytes, NUM_STAGES)

        rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma_layout))
        w_scales = w_scale_ptr + expert * ((N2 // 128) * KB) + ((pid_n * BLOCK_N) // 128) * KB
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
        p0 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
        p1 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
        for g in range(0, KB, GROUP):
            p0 = _issue(a_bufs, b_bufs, ready, g, p0, NUM_STAGES)
            for j in gl.static_range(1, GROUP):
                if j % 2 == 1:
                    p1 = _issue(a_bufs, b_bufs, ready, g + j, p1, NUM_STAGES)
                    p0 = warpgroup_mma_wait(num_outstanding=1, deps=(p0,))
                    acc = _promote(acc, p0, a_scale_ptr, w_scales, rows, R, g + j - 1)
                else:
                    p0 = _issue(a_bufs, b_bufs, ready, g + j, p0, NUM_STAGES)
                    p1 = warpgroup_mma_wait(num_outstanding=1, deps=(p1,))
                    acc = _promote(acc, p1, a_scale_ptr, w_scales, rows, R, g + j - 1)
                _load(a_desc, w_desc, a_bufs, b_bufs, ready, g + j - 1 + NUM_STAGES, KB, off_m, off_w, nbytes,
                      NUM_STAGES)
            if (GROUP - 1) % 2 == 1:
                p1 = warpgroup_mma_wait(num_outstanding=0, deps=(p1,))
                acc = _promote(acc, p1, a_scale_ptr, w_scales, rows, R, g + GROUP - 1)
            else:
                p0 = warpgroup_mma_wait(num_outstanding=0, deps=(p0,))
                acc = _promote(acc, p0, a_scale_ptr, w_scales, rows, R, g + GROUP - 1)
            _load(a_desc, w_desc, a_bufs, b_bufs, ready, g + GROUP - 1 + NUM_STAGES, KB, off_m, off_w, nbytes,
                  NUM_STAGES)
        for i in gl.static_range(NUM_STAGES):
            mbarrier.invalidate(ready.index(i))

        row_ok = rows - off_m < gl.load(block_rows_ptr + pid_m)
        cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
        gl.store(y_ptr + rows.to(gl.int64)[:, None] * N2 + cols[None, :], acc.to(gl.bfloat16), mask=row_ok[:, None])
