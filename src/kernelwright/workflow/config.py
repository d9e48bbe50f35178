"""Run configuration: the agents config file (TOML) and the knobs of the loop.

A config file has four tables (every key optional except the agents)::

    [run]      definition, solution, device, devices, quick, coders, ... (RunConfig fields)
    [gate]     warmup, iterations, trials, check_limit, ...              (GateSettings)
    [budget]   max_tokens, max_cost_usd, max_wall_s, max_attempts, max_cycles
    [agents.default] / [agents.planner] / [agents.coder] / [agents.coder-2] / [agents.synthesizer] /
    [agents.researcher]   an AgentConfig each (kernelwright.agents), plus ``allowed_tools`` and
                          ``resume_session``; more specific tables override less specific ones.

Examples live in ``kernelwright/workflow/examples/``.  Errors are :class:`ConfigError`
(a ``ValueError`` with a one-line message).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ROLES = ("planner", "coder", "synthesizer", "researcher")
ROLE_KEYS = ("allowed_tools", "resume_session")

DEFAULT_SURFACE = ["solution/**/*.py", "solution/**/*.cu", "solution/**/*.cuh", "solution/**/*.cpp",
                   "solution/**/*.h", "solution/**/*.hpp"]

# what Claude Code may run without asking, per role (its acceptEdits mode denies Bash otherwise)
CLAUDE_TOOLS = {
    "coder": ["Read", "Edit", "Write", "Glob", "Grep", "Bash(kernelwright eval:*)", "Bash(kernelwright profile:*)",
              "Bash(git diff:*)", "Bash(git status:*)", "Bash(python -c:*)"],
    "synthesizer": ["Read", "Edit", "Write", "Glob", "Grep", "Bash(kernelwright eval:*)", "Bash(git diff:*)",
                    "Bash(git apply:*)", "Bash(git status:*)"],
    "planner": ["Read", "Glob", "Grep"],
    "researcher": ["Read", "Glob", "Grep", "WebSearch", "WebFetch"],
}


class ConfigError(ValueError):
    """Invalid run configuration (one line)."""


class GateSettings(BaseModel):
    """How the orchestrator's own gate evaluations measure.  ``None`` keeps the gate's default
    (flashinfer-bench: 10 warm-up, 50 timed iterations, 3 trials)."""

    model_config = ConfigDict(extra="forbid")

    warmup: Optional[int] = Field(default=None, ge=0)
    iterations: Optional[int] = Field(default=None, ge=1)
    trials: Optional[int] = Field(default=None, ge=1)
    reference_iterations: Optional[int] = Field(default=None, ge=1)
    graph_iterations: Optional[int] = Field(default=None, ge=0)
    #: CUPTI traces every held timed call (False: no CUPTI checks, no kernel records; None: the gate's default)
    cupti_tracing: Optional[bool] = None
    #: checks (after each attempt) use only the first N public workloads; None = all of them
    check_limit: Optional[int] = Field(default=None, ge=1)
    #: wall-clock limit of one evaluation (seconds); past it the evaluation is killed and fails
    timeout_s: float = Field(default=3600.0, gt=0)


class Budget(BaseModel):
    """Limits of one run, checked before every agent turn.  ``None`` = no limit."""

    model_config = ConfigDict(extra="forbid")

    #: all prompt + output tokens of all turns (tokens)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    #: summed cost of all turns as reported by the clients (USD)
    max_cost_usd: Optional[float] = Field(default=None, gt=0)
    #: orchestrator running time across sessions (seconds)
    max_wall_s: Optional[float] = Field(default=None, gt=0)
    #: coder attempts
    max_attempts: Optional[int] = Field(default=None, ge=1)
    #: planning cycles
    max_cycles: Optional[int] = Field(default=None, ge=1)


class RunConfig(BaseModel):
    """Everything a run needs besides its state.  Stored in the state file at creation."""

    model_config = ConfigDict(extra="forbid")

    definition: str
    #: starting solution folder (manifest.json + sources); None = the shipped solution
    solution: Optional[str] = None
    device: Literal["cuda", "cpu"] = "cuda"
    #: GPU indices or a count; on CPU, the number of pseudo-devices
    devices: Union[int, List[int], None] = None
    #: reduced sizes (``<definition>__quick``): CPU demos and tests
    quick: bool = False
    coders: int = Field(default=2, ge=1, le=32)
    #: assignments the planner may issue per cycle (default: coders)
    max_assignments: Optional[int] = Field(default=None, ge=1)
    #: coders that attempt each assignment independently
    attempts_per_assignment: int = Field(default=1, ge=1)
    #: promotion needs geomean(best latency / candidate latency) >= 1 + min_improvement
    min_improvement: float = Field(default=0.02, ge=0)
    #: a passing attempt goes to the final evaluation only if its check ratio is at least this
    final_min_check_ratio: float = Field(default=1.0, ge=0)
    max_finals_per_cycle: int = Field(default=2, ge=1)
    #: failed attempts in one direction before the Researcher is asked
    stall_attempts: int = Field(default=3, ge=1)
    #: failed research-assisted attempts before the run waits for the operator
    research_attempts: int = Field(default=2, ge=1)
    #: extra planner turns when its reply is not a valid plan
    planner_retries: int = Field(default=2, ge=0)
    #: consecutive failed cycles (no valid plan) before the run waits for the operator
    max_planner_failures: int = Field(default=3, ge=1)
    #: wait (poll) for the operator when escalated; False: exit with status 3
    wait_for_operator: bool = True
    poll_s: float = Field(default=2.0, gt=0)
    #: official timing needs a quiet "device" or the whole "host"; default host on CPU, device on CUDA
    official_quiet: Optional[Literal["device", "host"]] = None
    #: coder turns sharing one device for their own quick checks
    turn_share: int = Field(default=2, ge=1)
    #: files coders may change (globs relative to the worktree root)
    edit_surface: List[str] = Field(default_factory=lambda: list(DEFAULT_SURFACE))
    #: profile every new best (ncu when available, else the torch profiler)
    profile: bool = True
    #: also time the baseline kernels (kernelwright.baselines) with the starting solution
    baselines: bool = False
    gate: GateSettings = Field(default_factory=GateSettings)
    budget: Budget = Field(default_factory=Budget)
    #: agent name or role or "default" -> AgentConfig fields (+ allowed_tools, resume_session)
    agents: Dict[str, Dict[str, Any]] = Field(default_factory=dict)

    # -- derived ---------------------------------------------------------------------------
    @property
    def assignments_per_cycle(self) -> int:
        return self.max_assignments or self.coders

    @property
    def quiet(self) -> str:
        return self.official_quiet or ("host" if self.device == "cpu" else "device")

    def device_names(self) -> List[str]:
        """``cuda:<i>`` for each GPU index, or ``cpu:<i>`` pseudo-devices."""
        if self.device == "cpu":
            n = self.devices if isinstance(self.devices, int) else len(self.devices or []) or 1
            return [f"cpu:{i}" for i in range(max(1, n))]
        if isinstance(self.devices, list):
            return [f"cuda:{i}" for i in self.devices]
        if isinstance(self.devices, int):
            return [f"cuda:{i}" for i in range(self.devices)]
        try:
            import torch

            n = torch.cuda.device_count()
        except Exception:  # pragma: no cover
            n = 0
        return [f"cuda:{i}" for i in range(max(1, n))]

    def agent_names(self) -> List[str]:
        return ["planner"] + [f"coder-{i + 1}" for i in range(self.coders)] + ["synthesizer", "researcher"]

    def agent_settings(self, name: str) -> Dict[str, Any]:
        """Merged settings for one agent: default < role < agent name."""
        role = role_of(name)
        merged: Dict[str, Any] = {}
        for key in ("default", role, name):
            section = self.agents.get(key)
            if section:
                for k, v in section.items():
                    if k == "options" and isinstance(v, dict):
                        merged["options"] = {**merged.get("options", {}), **v}
                    else:
                        merged[k] = v
        if "backend" not in merged:
            raise ConfigError(f"no agent backend configured for {name} (set [agents.default] backend or [agents.{role}])")
        return merged


def role_of(agent: str) -> str:
    return "coder" if agent.startswith("coder") else agent


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "config"
    return f"{where}: {first.get('msg')}"


def parse_config(data: Dict[str, Any], overrides: Optional[Dict[str, Any]] = None) -> RunConfig:
    """Build a RunConfig from a config-file dict ([run], [gate], [budget], [agents]) plus
    command-line overrides (``None`` values ignored).  Raises ConfigError."""
    data = dict(data)
    flat: Dict[str, Any] = dict(data.pop("run", {}) or {})
    for key in ("gate", "budget", "agents"):
        if key in data:
            flat[key] = data.pop(key)
    flat.update(data)  # top-level run keys are accepted too
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k in Budget.model_fields:
            flat.setdefault("budget", {})
            flat["budget"] = {**flat["budget"], k: v}
        else:
            flat[k] = v
    try:
        cfg = RunConfig.model_validate(flat)
    except ValidationError as exc:
        raise ConfigError(f"invalid run config: {_one_line(exc)}") from None
    unknown = [k for k in cfg.agents if k not in ("default",) + ROLES and not k.startswith("coder-")]
    if unknown:
        raise ConfigError(f"invalid run config: agents.{unknown[0]}: unknown agent or role "
                          f"(use default, planner, coder, coder-N, synthesizer, researcher)")
    for name in cfg.agent_names():
        check_agent_settings(cfg, name)
    return cfg


def load_config_file(path: Path) -> Dict[str, Any]:
    """Read a TOML config file.  Raises ConfigError (missing file, bad TOML)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    base = path.parent.resolve()
    run = data.get("run", {})
    if isinstance(run, dict) and run.get("solution") and not Path(run["solution"]).is_absolute():
        run["solution"] = str((base / run["solution"]).resolve())
    for section in (data.get("agents") or {}).values():
        opts = section.get("options") if isinstance(section, dict) else None
        if isinstance(opts, dict) and isinstance(opts.get("script"), str) and opts["script"].endswith(".json"):
            if not Path(opts["script"]).is_absolute():
                opts["script"] = str((base / opts["script"]).resolve())
    return data


def check_agent_settings(cfg: RunConfig, name: str) -> None:
    """Validate one agent's merged settings against kernelwright.agents.AgentConfig."""
    from kernelwright.agents import AgentConfig, AgentConfigError

    settings = cfg.agent_settings(name)
    agent_part = {k: v for k, v in settings.items() if k not in ROLE_KEYS}
    try:
        AgentConfig.parse(agent_part)
    except AgentConfigError as exc:
        raise ConfigError(f"agents for {name}: {exc}") from None
    tools = settings.get("allowed_tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
        raise ConfigError(f"agents for {name}: allowed_tools must be a list of strings")
