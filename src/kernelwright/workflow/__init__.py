"""The optimisation workflow: a team of coding agents, promoted only by the gate.

``kernelwright optimize`` / ``kernelwright run ...`` on the command line; in Python::

    from kernelwright.workflow.config import load_config_file, parse_config
    from kernelwright.workflow.runs import create_run
    from kernelwright.workflow.loop import Orchestrator

    cfg = parse_config(load_config_file("agents.toml"), {"definition": "moe"})
    create_run("runs/moe-1", cfg)
    Orchestrator("runs/moe-1").run()

Modules (one concern each):

``config``    the run/agents config (TOML): roles, budgets, gate settings
``state``     the SQLite state of a run: schema, transactions, recovery after a kill, and every
              read and write of the orchestrator as a typed method
``runs``      creating a run folder; read-only views used by the loop, console and report
``worktrees`` the run repository, per-agent git worktrees, the edit-surface check
``leases``    device leases (turn / check / profile / official), waiting state
``evaljob``   the orchestrator's own gate evaluations, in a subprocess per evaluation
``profiler``  the Profiler tool (ncu or torch profiler) -> bottleneck summary
``roles``     structured replies of the Planner, Synthesizer, Researcher, Coder; validation
``prompts``   role prompts, turn prompts, context files
``loop``      the orchestrator state machine (main loop, bookkeeping, stall policy, budgets)
``jobs``      its steps: plan, code, check, synthesis, final, profile, research (claim/work/commit)
``console``   operator commands (status, pause, resume, stop, redirect, note, invalidate)
``report``    the run's HTML report
``demo``      the scripted CPU demo team

See docs/workflow.md.
"""
