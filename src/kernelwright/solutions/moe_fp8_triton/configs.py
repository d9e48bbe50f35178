"""The block-size table of the MoE solution: which launch configuration ``kernel.run`` uses for T
tokens.  Data only (no imports); docs/kernels/moe.md says why each row is what it is.

``CONFIGS`` holds (max T, config) rows, first match wins; the last row's max T is None (every
larger T).  The MoE tuning harness (docs/kernels/moe.md, "Tuning") measures variants of these
rows on the GPU, can replace this assignment with the fastest correct variant per T range, and
writes copies of the solution with some rows changed for a gate A/B.

Keys (kernel.py reads them; [default] where a row may leave one out):
  ROUTE_BT, ROUTE_WARPS        routing kernel: tokens per program, warps
  BLOCK_M                      rows per M-block of both GEMMs (16: mma.sync; 64 and 128: wgmma)
  QG                           GEMM1's BLOCK_N = one C quantisation group per tile row = the K
                               width of each GEMM2 dot
  G1_BLOCK_K, G1_WARPS, G1_STAGES, G1_GROUP (M-blocks per L2 group), G1_SPLIT_K [1]
  G2_BLOCK_N, G2_BLOCK_K, G2_WARPS, G2_STAGES, G2_GROUP, G2_SPLIT_M [1], G2_PERSIST [PERSIST]
  COMBINE                      GEMM2 adds the weighted rows into the output (bf16 atomics)
                               instead of the reduce kernel
  RED_BT, RED_BH, RED_WARPS    reduce kernel: tokens and columns per program, warps
  TMA [False]                  gemm_tma.py: TMA tile loads after a gather into expert-sorted rows
  PERSIST [0]                  programs per SM of a persistent tile loop (0: one per bounded tile)
  A_SCALE_SORTED [False]       the gather also writes the activation scales in row order
  G1_WS, G2_WS [False]         gemm_ws.py's warp-specialised Gluon GEMMs; "auto": where the
                               tiles fit and the device can run them (CUDA sm_90), else Triton's
  G1_WS_STAGES [4], G2_WS_STAGES [5], G2_WS_GROUP [4]
"""

CONFIGS = (
    # decode: 16-row M-blocks on mma.sync, pointer loads; GEMM1 split in two K halves (a few
    # active experts leave most of the 132 SMs idle otherwise)
    (256, dict(ROUTE_BT=1, ROUTE_WARPS=1, BLOCK_M=16, QG=64, G1_BLOCK_K=256, G1_WARPS=4,
               G1_STAGES=4, G1_GROUP=1, G1_SPLIT_K=2, G2_BLOCK_N=64, G2_BLOCK_K=128, G2_WARPS=4,
               G2_STAGES=4, G2_GROUP=1, COMBINE=False, RED_BT=1, RED_BH=1024, RED_WARPS=4)),
    # mid: the TMA path at BLOCK_M 64, activation scales in row order, GEMM2 on one warpgroup
    (2048, dict(ROUTE_BT=4, ROUTE_WARPS=1, BLOCK_M=64, QG=128, G1_BLOCK_K=128, G1_WARPS=8,
                G1_STAGES=4, G1_GROUP=8, G2_BLOCK_N=128, G2_BLOCK_K=128, G2_WARPS=4, G2_STAGES=4,
                G2_GROUP=8, COMBINE=False, RED_BT=1, RED_BH=1024, RED_WARPS=4, TMA=True,
                A_SCALE_SORTED=True)),
    # prefill: BLOCK_M 128 with persistent tile loops, GEMM2 on 64-row tiles (3 programs per SM);
    # both GEMMs warp-specialised in Gluon where they can run
    (None, dict(ROUTE_BT=4, ROUTE_WARPS=1, BLOCK_M=128, QG=128, G1_BLOCK_K=128, G1_WARPS=16,
                G1_STAGES=3, G1_GROUP=8, G2_BLOCK_N=128, G2_BLOCK_K=128, G2_WARPS=4, G2_STAGES=3,
                G2_GROUP=8, COMBINE=False, RED_BT=1, RED_BH=1024, RED_WARPS=4, TMA=True, PERSIST=1,
                A_SCALE_SORTED=True, G2_SPLIT_M=2, G2_PERSIST=3, G1_WS="auto", G2_WS="auto")),
)
