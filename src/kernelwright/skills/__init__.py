"""Markdown skills handed to every agent of an optimisation run.

They are copied into each run repository under ``.kernelwright/skills/`` (tracked, so an
agent that edits them is caught by the edit-surface check) and named in every role prompt.
``skills_dir()`` is their folder; ``skill_names()`` lists them in reading order.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

SKILLS_DIR = Path(__file__).parent


def skills_dir() -> Path:
    return SKILLS_DIR


def skill_names() -> List[str]:
    return sorted(p.name for p in SKILLS_DIR.glob("*.md"))
