"""A per-call-signature launch cache for a solution's Triton launches (CUDA graph or direct).

Vendored: a solution folder is packed and loaded on its own, so every solution that uses this
module holds an identical copy of it (tests/solutions/test_launch_cache.py checks the bytes).

The host path of one eager call (Triton launches through the JIT dispatcher, allocations) can
cost far more than the kernels; replaying a captured graph costs one graph launch.  A graph
bakes in everything the launches see, so the caller's key must hold it all: the data pointers,
shapes, strides and dtypes of every tensor argument (``signature``) and every Python scalar or
module setting the launches read.  The kernels inside recompute from the current input contents
on every replay; nothing of a previous call's result is reused.  The first call of a key runs
through the JIT (compiling if needed; it writes that call's outputs) and then builds the entry
later calls replay.  The caller launches directly, without the cache, while its own stream is
capturing (its launches become part of the caller's graph).

Interface:

* ``launch(*args, warmup=False, record=None)``: the solution's launches of one call; with
  ``record`` (a list) it appends ``launch_record(fn, compiled, grid, args, meta)`` for each
  launch and returns the call's scratch tensors (kept alive by a direct entry).
* ``LaunchCache(launch, slots, on_capture_error=None)``; ``cache(key, args, mode)`` replays (or
  creates) the entry of ``key`` and returns True, or returns False when the caller must launch
  through the JIT itself.  ``mode``: "graph" (capture a CUDA graph with
  ``capture_error_mode="thread_local"``) or "direct" (re-issue the recorded launches through
  the compiled kernels' launchers on the current raw stream).  ``on_capture_error()``: called
  when a capture fails; True retries the capture (e.g. after turning off a launch option the
  driver cannot capture), False leaves the key on the JIT path.
* ``cache.entries``: the LRU of entries (None for a key that stays on the JIT path).
"""

from collections import OrderedDict

import torch
import triton

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def signature(t):
    """What a captured launch bakes in of a tensor argument."""
    return t.data_ptr(), t.shape, t.stride(), t.dtype


def launch_record(fn, compiled, grid, args, meta):
    """What one launch needs to be re-issued without the JIT dispatcher: the launcher, the
    CUfunction, the packed metadata (launch options such as PDL included), the 3-d grid and
    every argument in signature order (tensors as their device addresses; constexprs included,
    the launcher skips them)."""
    full = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)
    full += tuple(meta[name] for name in fn.arg_names[len(args):])
    grid = tuple(grid) + (1,) * (3 - len(grid))
    launcher = compiled.run
    return launcher, compiled.function, compiled.packed_metadata, grid, full


class UseJit(Exception):
    """A direct entry declines to launch (a profiler listens on Triton's launch hook)."""


def _direct_entry(records, scratch, device_index):
    """Re-issue the recorded launches on the current stream.  ``scratch`` (this signature's
    workspaces) stays referenced here for as long as the entry lives."""
    def launch():
        hook = triton.knobs.runtime.launch_enter_hook      # an empty HookChain unless a
        if hook is not None and getattr(hook, "calls", True):  # profiler listens: then JIT
            raise UseJit
        stream = _raw_stream(device_index)
        for launcher, function, packed, (g0, g1, g2), full in records:
            launcher(g0, g1, g2, stream, function, packed, None, None, None, *full)
    launch.scratch = scratch
    return launch


class LaunchCache:
    """An LRU of ``slots`` call signatures, each with its CUDA graph or recorded launches."""

    def __init__(self, launch, slots, on_capture_error=None):
        self.launch = launch
        self.slots = slots
        self.on_capture_error = on_capture_error
        self.entries = OrderedDict()

    def _new_entry(self, args, mode):
        """First call of a signature: launch through the JIT (compiling if needed; the outputs
        of this call are written by it), then build what later calls replay."""
        if mode == "direct" and _raw_stream is not None:
            records = []
            scratch = self.launch(*args, record=records)
            return _direct_entry(records, scratch, args[0].device.index)
        self.launch(*args)
        while True:
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    self.launch(*args)
                return graph.replay
            except Exception:
                # not capturable here: this signature stays on the JIT path, unless the
                # solution changes what it launches and asks for another capture
                if self.on_capture_error is None or not self.on_capture_error():
                    return None

    def __call__(self, key, args, mode):
        """Replay the entry of ``key`` (creating it on the first call); False: use the JIT path."""
        entry = self.entries.get(key)
        if entry is None:
            if key in self.entries:
                return False
            self.entries[key] = self._new_entry(args, mode)
            if len(self.entries) > self.slots:
                self.entries.popitem(last=False)
            return True
        self.entries.move_to_end(key)
        try:
            entry()
        except UseJit:
            return False
        return True
