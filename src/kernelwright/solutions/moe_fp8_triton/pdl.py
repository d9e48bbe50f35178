"""Programmatic dependent launch (PDL, sm_90 and later) between the kernels of one MoE call.

Config key PDL: every kernel after the first is launched with the programmatic stream
serialization attribute (Triton's ``launch_pdl``; inside a stream capture it becomes a
programmatic edge of the CUDA graph).  The GPU may then schedule a kernel's programs while the
previous kernel's last wave still runs, instead of after it has drained and the next launch has
been processed.  Correctness rests on two rules that every kernel here follows:

* ``pdl_enter`` is the first statement of each kernel, before any global load or store: its
  ``griddepcontrol.wait`` returns only once the previous kernel has completed and its writes are
  visible, so no kernel reads a buffer its predecessor still writes, or overwrites one it still
  reads;
* the trigger (``griddepcontrol.launch_dependents``) comes after that wait, so a kernel's
  dependents are scheduled only after all of its programs have passed their own wait.

Both instructions are no-ops in a kernel launched without the attribute (the first kernel, or a
call with PDL off).  Under the Triton interpreter (CPU) the constexpr ``PDL`` is False and the
body is skipped.  Sources: CUDA C++ Programming Guide, "Programmatic Dependent Launch and
Synchronization"; PTX ISA, "griddepcontrol".
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """Wait for the previous kernel of the stream (or graph) to complete, then let the next one be
    scheduled.  Call first in the kernel."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
