"""Builds a diagnostic copy of the shipped MoE solution whose entry point reports, on stderr (the
gate's worker log), how long each call spends on the host and whether it replayed a cached CUDA
graph or ran ``_forward`` (eager run + capture).  For finding where the gate's events headline
spends time that the gate's own graph replay does not (docs/gate.md, "Still open: the worker's host path").  The hit path is
re-implemented here piece by piece (``_graph_key``, the LRU, ``replay``) so each piece is timed;
misses go through the shipped ``run``.

Usage: python experiments/moe_host_probe.py OUT_DIR   then
       kernelwright bench -d moe --no-shipped -s OUT_DIR -w 0,1 --trials 1
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

PROBE = '''"""Diagnostic wrapper around kernel.run (experiments/moe_host_probe.py): times each piece of the
graph-cache hit path separately (is_current_stream_capturing, key, lookup, replay), then the key
again and a fixed pure-Python loop (warm-cache and CPU-speed references).  First of all, one
candidate piece in turn (the shipped key, leaner keys, object ids, the capture check through
torch._C), timed cold: what each would cost as the first work after the gate's iteration."""
import sys
import time

import torch

from . import kernel as _k

_forward = _k._forward
_stats = {"calls": 0, "forward": 0, "parts": []}
_clock = time.perf_counter


def _counting(*args, **kwargs):
    _stats["forward"] += 1
    return _forward(*args, **kwargs)


_k._forward = _counting


def _lean_key(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
              gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
              routed_scaling_factor, output, config):
    """Candidate key: every address, the three shapes that pin T, H, I, E_local and the expert
    count, no contiguity."""
    return (hidden_states.data_ptr(), hidden_states.shape, output.data_ptr(), routing_logits.data_ptr(),
            routing_logits.shape, routing_bias.data_ptr(), hidden_states_scale.data_ptr(),
            gemm1_weights.data_ptr(), gemm1_weights_scale.data_ptr(), gemm2_weights.data_ptr(),
            gemm2_weights.shape, gemm2_weights_scale.data_ptr(), local_expert_offset, routed_scaling_factor,
            config)


def _lean_key_io(*args):
    """The lean key plus the contiguity of the two per-call activations (input and output)."""
    return _lean_key(*args) + (args[2].is_contiguous() and args[10].is_contiguous(),)


def _id_key(*args):
    """Object identities only (not a safe key by itself: a measurement of the floor)."""
    return tuple(map(id, args))


_FIRST = (lambda a: _k._graph_key(*a), lambda a: _lean_key(*a), lambda a: _lean_key_io(*a),
          lambda a: _id_key(*a), lambda a: torch._C._cuda_isCurrentStreamCapturing())
_FIRST_NAMES = ("key", "lean", "lean+io", "ids", "capturing(C)")
_first = {name: [] for name in _FIRST_NAMES}


def run(*args, **kwargs):
    if not args[2].is_cuda:      # CPU (interpreter): no graphs to probe
        _k.run(*args, **kwargs)
        return
    # the first thing after the gate's per-iteration work (cold host caches): one candidate piece,
    # in turn, so each is timed cold on every fifth call
    which = _stats["calls"] % len(_FIRST)
    f0 = _clock()
    _FIRST[which](args[:11] + (None,))
    _first[_FIRST_NAMES[which]].append(_clock() - f0)
    t0 = _clock()
    capturing = torch.cuda.is_current_stream_capturing()
    t1 = _clock()
    hit = None
    if not capturing and not kwargs:
        key = _k._graph_key(*args[:11], None)
        t2 = _clock()
        hit = _k._graphs.get(key)
        t3 = _clock()
    if hit is not None:
        hit.replay()
        t4 = _clock()
        # after the replay (the GPU already has its work): the same key again, now with warm
        # caches, and a fixed pure-Python loop.  Slow key2/canary too: the whole process runs
        # slowly; only the first key slow: the host path is cold right after the gate's work.
        _k._graph_key(*args[:11], None)
        t5 = _clock()
        acc = 0
        for i in range(200):
            acc += i * i
        t6 = _clock()
        _stats["parts"].append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5))
    else:
        _k.run(*args, **kwargs)
    _stats["calls"] += 1
    if _stats["calls"] % 20 == 0 and _stats["parts"]:
        last = _stats["parts"][-20:]
        med = [sorted(p[i] for p in last)[len(last) // 2] * 1e6 for i in range(6)]
        print(f"[moe-probe] calls {_stats['calls']} forward runs {_stats['forward']} graphs {len(_k._graphs)} "
              f"hit-path us (median of last {len(last)}): capturing? {med[0]:.1f} key {med[1]:.1f} "
              f"lookup {med[2]:.1f} replay {med[3]:.1f} key2 {med[4]:.1f} canary {med[5]:.1f}",
              file=sys.stderr, flush=True)
        cold = {n: sorted(v)[len(v) // 2] * 1e6 for n, v in _first.items() if v}
        print("[moe-probe] cold first piece, median us over all calls: "
              + " ".join(f"{n} {v:.1f} (n={len(_first[n])})" for n, v in cold.items()), file=sys.stderr, flush=True)
'''


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python experiments/moe_host_probe.py OUT_DIR")
    src = Path(__file__).resolve().parents[1] / "src/kernelwright/solutions/moe_fp8_triton"
    out = Path(sys.argv[1])
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
    (out / "probe.py").write_text(PROBE)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(name="moe_host_probe", entry_point="probe.py::run",
                    description="diagnostic: the shipped MoE solution with host-time and graph-cache counters")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    print(out)


if __name__ == "__main__":
    main()
