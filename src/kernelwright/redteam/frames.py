"""What the red-team cases use to find the gate's worker frames from inside a solution's ``run``.

The call path differs by device: on the CPU ``run`` is called from ``Harness._call`` inside
``op_time``; on CUDA a timed call goes through ``_held_call`` (the blocking kernel) first, one
frame deeper.  A case that looked a fixed number of frames up found nothing on CUDA and ran as an
honest solution there, so that its verdict said nothing about the gate.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Optional


def harness_frame(name: str = "op_time", limit: int = 8) -> Optional[FrameType]:
    """The nearest frame above the caller whose function is ``name`` (within ``limit`` frames),
    or None when the solution was not called from there."""
    frame = sys._getframe(1)
    for _ in range(limit):
        frame = frame.f_back
        if frame is None:
            return None
        if frame.f_code.co_name == name:
            return frame
    return None
