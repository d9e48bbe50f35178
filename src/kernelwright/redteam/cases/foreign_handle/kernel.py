"""Makes the parent connect where the solution says (found by the 2026-11-29 second red-team
review).  A shared-memory CPU tensor travels as ``rebuild_storage_fd`` with a ``DupFd`` whose
address the receiver connects to while unpickling; a forged message can name any address, and one
that accepts but never answers stalls the parent forever, beyond every timeout.  This solution
writes such a message straight to the worker's pipe descriptor (its address: a path nobody listens
on, so an unguarded parent fails at once instead of hanging).  Expected: GATE_TAMPERED (the parent
accepts shared-memory handles only from the worker's own resource sharer, whose address it learned
from the worker's ready message, and fetches them under a deadline).
"""

import os
import struct
import sys
from multiprocessing.reduction import ForkingPickler
from multiprocessing.resource_sharer import DupFd

import torch.multiprocessing.reductions as reductions
import triton
import triton.language as tl
from torch import UntypedStorage


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


class _ForeignHandle:
    def __reduce__(self):
        handle = DupFd.__new__(DupFd)
        handle._id = ("/tmp/kw-redteam-nobody-listens-here", 1)
        return (reductions.rebuild_storage_fd, (UntypedStorage, handle, 4))


_sent = []


def run(x, weight, eps, y):
    if not _sent:
        frame = sys._getframe()
        while frame is not None and type(frame.f_locals.get("self")).__name__ != "Harness":
            frame = frame.f_back
        if frame is not None:
            data = bytes(ForkingPickler.dumps({"ok": True, "sets": _ForeignHandle()}))
            os.write(frame.f_locals["self"]._conn.fileno(), struct.pack("!i", len(data)) + data)
            _sent.append(1)
    _empty[(1,)](y)
