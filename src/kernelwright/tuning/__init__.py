"""Tuning harnesses of the shipped kernels: GPU sweeps of their launch configurations, measured
with the gate's rules outside the gate, and the tools that turn a sweep's result into a shipped
table.  Trusted tooling, never part of a verdict: a table change ships only after a gate A/B
(``kernelwright bench -s``) on the H200.

``kernelwright.tuning.moe``  the fused MoE (``solutions/moe_fp8_triton``): variants of its
                             block-size table (``configs.py``) — ``sweep`` (GPU), ``aot`` (sm_90a
                             compile on the CPU), ``ab-folder`` (a copy with some rows changed),
                             ``once`` (a few eager calls for ``ncu``).
``kernelwright.tuning.dsa``  the shipped DSA indexer and sparse-attention kernels: their launch
                             modes and split/fuse configurations at contest shapes (GPU).
``kernelwright.tuning.timer`` the gate-style timing loop both use.

Each is a command, ``python -m kernelwright.tuning.moe --help`` / ``python -m
kernelwright.tuning.dsa --help``; ``bash scripts/h200.sh variants`` runs the MoE sweep on the
device machine.  See docs/kernels/moe.md ("Tuning") for the MoE table's workflow.
"""
