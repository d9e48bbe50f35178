"""The launch cache is vendored: one module, an identical copy in each solution folder using it
(a solution folder is packed and loaded on its own, so it cannot import another's)."""

from pathlib import Path

import kernelwright.solutions

ROOT = Path(kernelwright.solutions.__file__).parent
FOLDERS = ["dsa_indexer_triton", "dsa_attention_triton"]


def test_launch_cache_copies_are_identical():
    copies = {f: (ROOT / f / "launch_cache.py").read_bytes() for f in FOLDERS}
    first = copies[FOLDERS[0]]
    differ = [f for f, text in copies.items() if text != first]
    assert not differ, f"launch_cache.py differs from {FOLDERS[0]}'s copy in {differ}"


def test_every_user_has_a_copy_and_every_copy_is_listed():
    users = {p.parent.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")
             if "from .launch_cache import" in p.read_text()}
    copies = {p.parent.relative_to(ROOT).as_posix() for p in ROOT.rglob("launch_cache.py")}
    assert users == copies == set(FOLDERS), (users, copies)


def test_packed_solutions_carry_the_copy():
    from kernelwright.solutions import load_solution_folder

    for f in FOLDERS:
        paths = {s.path for s in load_solution_folder(ROOT / f).sources}
        assert "launch_cache.py" in paths, (f, paths)
