"""Fixtures of the agents test suite.

Real agent clients are looked up in ``$KW_AGENT_CLIENTS/node_modules/.bin``
(default: ``<repo>/.agent-clients``, filled by ``install_clients.sh``) and
then on PATH.  A test that needs a missing client is skipped, unless
``KW_REQUIRE_REAL_CLIENTS`` is set (CI), in which case it fails.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
try:
    import kernelwright.agents  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO / "src"))

from agents_fake_servers import FakeModelServer  # noqa: E402

# variables that could point a client at a real provider or real credentials
_SCRUB_PREFIXES = ("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "CLAUDE_")


@pytest.fixture(autouse=True)
def _scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may see a real credential or provider URL from the outer environment."""
    for key in list(os.environ):
        if key.startswith(_SCRUB_PREFIXES) or key.lower() in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(key, raising=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "worktree"
    ws.mkdir()
    return ws


@pytest.fixture
def serve() -> Iterator[Callable[..., FakeModelServer]]:
    """Start fake servers for a test; all are stopped at teardown."""
    started: list[FakeModelServer] = []

    def start(handler) -> FakeModelServer:  # type: ignore[no-untyped-def]
        srv = FakeModelServer(handler).__enter__()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.__exit__(None, None, None)
