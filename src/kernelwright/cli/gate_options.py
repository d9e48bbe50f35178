"""The gate settings ``bench`` and ``eval`` share, as one command parameter.

A command declares ``gate: GateOptions = GATE_OPTIONS`` and is decorated with
``with_gate_options(fast_unsafe_help)``: its command-line signature then holds, in that place,
the options ``--warmup``, ``--iterations``, ``--trials``, ``--atol``, ``--rtol``,
``--required-matched-ratio``, ``--timeout``, ``--fast-unsafe`` and ``--contest-rule``, and the
command receives their values as one ``GateOptions``.  Nothing here imports the gate (or torch)
until a command runs: ``--help`` stays cheap.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional

import typer

from kernelwright.cli.common import UsageError

CONTEST_RULE_HELP = ("Judge correctness by the FlashInfer-Bench (contest) rule alone; by default a check must also pass "
                     "the definition's strict rule (relative L2 error, per row for MoE and attention: docs/gate.md). "
                     "The strict errors are still recorded; traces and summary say which rule judged.")


@dataclass(frozen=True)
class GateOptions:
    """How the gate measures and judges one command's runs, as given on its command line (None:
    the gate's default)."""

    warmup: Optional[int]
    iterations: Optional[int]
    trials: Optional[int]
    atol: Optional[float]
    rtol: Optional[float]
    required_matched_ratio: Optional[float]
    timeout: Optional[float]
    fast_unsafe: bool
    contest_rule: bool

    def tolerance(self) -> Dict[str, Optional[float]]:
        """The tolerance overrides.  Raises UsageError for a matched ratio above 1."""
        ratio = self.required_matched_ratio
        if ratio is not None and ratio > 1:
            raise UsageError(f"--required-matched-ratio {ratio:g}: must be between 0 and 1")
        return {"atol": self.atol, "rtol": self.rtol, "required_matched_ratio": ratio}

    def config(self, device: str, quick: bool):
        """The ``GateConfig`` of these options on ``device`` (``quick``: the reduced preset)."""
        from kernelwright.gate.evaluate import GateConfig

        return GateConfig.preset(device, quick, warmup=self.warmup, iterations=self.iterations, trials=self.trials,
                                 guards=not self.fast_unsafe, contest_rule=self.contest_rule, **self.tolerance())

    def timeouts(self):
        """The worker's ``Timeouts`` for ``--timeout`` (None: the gate's defaults)."""
        from kernelwright.gate.session import Timeouts

        return Timeouts.per_call(self.timeout)


# the default that marks where a command's GateOptions parameter stands
GATE_OPTIONS: Any = object()


def _opt_count(what: str, default: int, least: int):
    """A gate iteration count (--warmup, --iterations, --trials): None keeps the gate's default."""
    return typer.Option(None, min=least, help=f"{what} (default {default}).")


def _opt_tolerance(flag: str, what: str):
    return typer.Option(None, flag, min=0.0, help=f"{what} for every check instead of the definition's (recorded in "
                                                  "each trace; a looser one marks the table row).")


def _opt_timeout():
    return typer.Option(None, "--timeout", min=1.0, metavar="SECONDS",
                        help="Per-call limit: a call of the solution (a correctness trial or one timed iteration) "
                             "that runs longer is TIMEOUT and the run goes on (default 300 s per call, 600 s "
                             "per timing phase).")


def _option_parameters(fast_unsafe_help: str) -> List[inspect.Parameter]:
    """The command-line parameters of ``GateOptions``, in the order ``--help`` lists them."""
    options = {
        "warmup": (Optional[int], _opt_count("Warm-up iterations per trial", 10, 0)),
        "iterations": (Optional[int], _opt_count("Timed iterations per trial", 50, 1)),
        "trials": (Optional[int], _opt_count("Trials with fresh inputs", 3, 1)),
        "atol": (Optional[float], _opt_tolerance("--atol", "Absolute tolerance")),
        "rtol": (Optional[float], _opt_tolerance("--rtol", "Relative tolerance")),
        "required_matched_ratio": (Optional[float], _opt_tolerance("--required-matched-ratio",
                                                                   "Fraction of elements that must match (0-1)")),
        "timeout": (Optional[float], _opt_timeout()),
        "fast_unsafe": (bool, typer.Option(False, "--fast-unsafe", help=fast_unsafe_help)),
        "contest_rule": (bool, typer.Option(False, "--contest-rule", help=CONTEST_RULE_HELP)),
    }
    return [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=annotation)
            for name, (annotation, option) in options.items()]


def with_gate_options(fast_unsafe_help: str) -> Callable[[Callable], Callable]:
    """Decorate a command whose ``GateOptions`` parameter defaults to ``GATE_OPTIONS``: typer sees
    the nine gate options in its place, the command gets them as one ``GateOptions``."""
    names = [f.name for f in fields(GateOptions)]

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        marker = next(p.name for p in signature.parameters.values() if p.default is GATE_OPTIONS)
        parameters = []
        for p in signature.parameters.values():
            parameters += _option_parameters(fast_unsafe_help) if p.name == marker else [p]

        @functools.wraps(command)
        def expanded(**kwargs):
            options = GateOptions(**{name: kwargs.pop(name) for name in names})
            return command(**kwargs, **{marker: options})

        expanded.__signature__ = signature.replace(parameters=parameters)
        expanded.__annotations__ = {**{p.name: p.annotation for p in parameters},
                                    "return": signature.return_annotation}
        return expanded

    return decorate
