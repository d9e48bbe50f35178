"""kernelwright: a correctness-gated workbench for LLM-serving GPU kernels.

Packages, one concern each (data flows one way, left to right):

``trace`` (FlashInfer-Trace data model) and ``inputs`` (input synthesis) -> ``definitions``
(built-in definitions, references, workload sets, roofline models; they wire ``inputs`` in) ->
``gate`` (correctness, timing, guards, verdicts) -> ``report``; ``solutions`` and
``baselines`` are evaluated by the gate; ``agents`` and ``workflow`` drive an
optimisation run that only the gate can promote from; ``cli`` is the thin front end, and
``selection`` turns the paths and selectors a user gives into solutions and workloads (for
``cli`` and ``cluster``).
"""

__version__ = "0.1.0"

# the hidden split's salt leaves the environment before anything else runs (gate/hidden.py)
from kernelwright.gate.hidden import take_salt_from_environment as _take_salt

_take_salt()
del _take_salt
