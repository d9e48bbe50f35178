"""The gate: the only part of kernelwright that decides whether a solution is correct and how fast
it is (docs/gate.md).

Modules, parent side first: ``evaluate`` (one solution on one workload: ``WorkloadContext``,
``evaluate``, ``time_only``), ``bench`` (many solutions over many workloads: ``run_bench``),
``session`` (the parent's handle on one worker process), ``checkers`` (output comparison),
``headline`` (which clock is the headline), ``guards`` (reason codes, thresholds, static scan,
provenance), ``hidden`` (the held-out split), ``device_info`` (roofline ceilings),
``environment``, ``wire`` (allow-listed unpickling).  Worker side: ``worker`` (the spawned
process that runs one solution), ``timing`` (clocks bound before the solution runs),
``integrity`` (tamper detection), ``fresh`` (timed inputs), ``sandbox`` (the OS boundary).

Importing the package imports none of them (``kernelwright/__init__`` itself imports ``hidden``):
the names below are loaded on first use
(``__getattr__``), so the worker, which imports ``kernelwright.gate.worker`` when it is spawned,
imports exactly the modules it names.  ``evaluate`` and ``environment`` name both a module and
its main function: import the function from its module (``from kernelwright.gate.evaluate import
evaluate``).
"""

from __future__ import annotations

from kernelwright.lazy import lazy_attributes

__all__ = [
    # gate.evaluate
    "GateConfig", "SolutionRun", "WorkloadContext", "time_only", "normalize_outputs",
    # gate.bench
    "run_bench", "BenchPlan", "BenchRun", "Candidate", "ProgressHook", "write_roster", "static_warnings",
    # gate.session
    "WorkerSession", "Timeouts", "focus",
    # gate.hidden
    "held_out_workloads", "hidden_salt", "take_salt_from_environment",
    # gate.device_info, gate.environment, gate.sandbox, gate.guards
    "load_ceilings", "measure_ceilings", "source_revision", "LEVELS", "static_scan", "site_dirs",
    # modules used as a whole by other packages
    "guards", "fresh",
]

_WHERE = {
    **dict.fromkeys(("GateConfig", "SolutionRun", "WorkloadContext", "time_only", "normalize_outputs"), "evaluate"),
    **dict.fromkeys(("run_bench", "BenchPlan", "BenchRun", "Candidate", "ProgressHook", "write_roster",
                     "static_warnings"), "bench"),
    **dict.fromkeys(("WorkerSession", "Timeouts", "focus"), "session"),
    **dict.fromkeys(("held_out_workloads", "hidden_salt", "take_salt_from_environment"), "hidden"),
    **dict.fromkeys(("load_ceilings", "measure_ceilings"), "device_info"),
    "source_revision": "environment",
    "LEVELS": "sandbox",
    **dict.fromkeys(("static_scan", "site_dirs"), "guards"),
}

# only the names above: any other (a submodule's name) raises, so that ``from kernelwright.gate
# import fresh`` imports the submodule
__getattr__ = lazy_attributes(__name__, _WHERE)
