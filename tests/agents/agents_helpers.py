"""Helpers of the agents test suite: finding the real clients, and an
environment that keeps them off the internet and out of the user's config."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

import pytest

from agents_fake_servers import FakeModelServer

REPO = Path(__file__).resolve().parents[2]

CLIENT_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}


def clients_dir() -> Path:
    return Path(os.environ.get("KW_AGENT_CLIENTS") or REPO / ".agent-clients")


def find_client(name: str) -> Optional[str]:
    cand = clients_dir() / "node_modules" / ".bin" / name
    if cand.exists() and os.access(cand, os.X_OK):
        return str(cand)
    return shutil.which(name)


def require_client(name: str) -> str:
    """Path of client ``name``; skip (or fail under KW_REQUIRE_REAL_CLIENTS) if absent."""
    path = find_client(name)
    if path:
        return path
    msg = (f"real client `{name}` ({CLIENT_PACKAGES.get(name)}) not found in {clients_dir()}/node_modules/.bin "
           f"or on PATH; run tests/agents/install_clients.sh")
    if os.environ.get("KW_REQUIRE_REAL_CLIENTS"):
        pytest.fail(msg + " (KW_REQUIRE_REAL_CLIENTS is set)")
    pytest.skip(msg)


def client_env(home: Path, server: FakeModelServer) -> dict[str, str]:
    """Environment that keeps a real client off the internet and out of the user's config.

    HOME (and XDG dirs) point at a temp dir; every proxy variable points at the
    fake server, which refuses CONNECT tunnels and records the host in
    ``server.blocked`` - so any attempt to reach a non-loopback host is both
    stopped and visible to the test.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "CODEX_HOME": str(home / ".codex"),
        "TMPDIR": str(home / "tmp"),
        "NO_COLOR": "1",
        "TERM": "dumb",
    }
    (home / "tmp").mkdir(exist_ok=True)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        env[var] = server.base_url
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    return env
