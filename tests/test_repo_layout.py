"""The repository's folders hold what the README's "Layout" says: ``scripts/`` the operational
scripts, each opening with a one-line purpose, and ``experiments/`` the one-shot probes, each
indexed in ``experiments/README.md`` with what it answered."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _purpose_line(path: Path) -> str:
    """The first comment or docstring line after a shebang."""
    for line in path.read_text().splitlines():
        if line.startswith("#!") or not line.strip():
            continue
        return line.lstrip("#\"' ").strip()
    return ""


def test_every_script_states_its_purpose():
    scripts = sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())
    assert scripts
    missing = [p.name for p in scripts if not _purpose_line(p).startswith("Purpose:")]
    assert not missing, f"scripts without a 'Purpose:' first line: {missing}"


def test_every_experiment_is_indexed():
    index = (ROOT / "experiments" / "README.md").read_text()
    missing = [p.name for p in sorted((ROOT / "experiments").glob("*.py")) if f"`{p.name}`" not in index]
    assert not missing, f"experiments/README.md does not list {missing}"
