"""The red-team suite: adversarial solutions the gate must reject, honest ones it must pass, and
canaries that check every definition's tolerance.

    from kernelwright.redteam import CASES, run_catalogue, run_canaries
    results = run_catalogue("cpu")          # CUDA-only cases are SKIPPED on CPU
    canaries = run_canaries("cpu")

``kernelwright redteam`` prints both as tables and exits non-zero on any unexpected outcome.
"""

from kernelwright.redteam.canaries import CanaryResult, canary_solution, run_canaries, run_canary
from kernelwright.redteam.catalogue import CASES, PASS, Case, get_case
from kernelwright.redteam.runner import CaseResult, gate_config, run_case, run_catalogue

__all__ = ["CASES", "PASS", "Case", "CaseResult", "CanaryResult", "canary_solution", "gate_config", "get_case",
           "run_canaries", "run_canary", "run_case", "run_catalogue"]
