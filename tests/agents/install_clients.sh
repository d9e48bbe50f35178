#!/usr/bin/env bash
# Install the real agent clients used by tests/agents/test_real_clients.py.
#
#   bash tests/agents/install_clients.sh            # into $KW_AGENT_CLIENTS or <repo>/.agent-clients
#
# Versions are pinned; the tests assert them. Needs node (>= 20) and npm.
# Claude Code's npm package ships a native binary (the postinstall step links
# it into place); Codex ships a native binary behind a node launcher; Gemini
# CLI is a node bundle.
set -euo pipefail

CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
GEMINI_CLI_VERSION=0.61.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${KW_AGENT_CLIENTS:-$repo/.agent-clients}"
mkdir -p "$dest"

want="claude-code@$CLAUDE_CODE_VERSION codex@$CODEX_VERSION gemini-cli@$GEMINI_CLI_VERSION"
stamp="$dest/.installed"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" \
      && -x "$dest/node_modules/.bin/claude" && -x "$dest/node_modules/.bin/codex" \
      && -x "$dest/node_modules/.bin/gemini" ]]; then
  echo "agent clients already installed in $dest ($want)"
  exit 0
fi

command -v npm >/dev/null || { echo "install_clients.sh: npm not found (need node >= 20 and npm)" >&2; exit 1; }

# a package.json of our own keeps npm from walking up into the repository
[[ -f "$dest/package.json" ]] || echo '{"name": "kw-agent-clients", "private": true}' > "$dest/package.json"

npm install --prefix "$dest" --no-audit --no-fund --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" \
  "@openai/codex@$CODEX_VERSION" \
  "@google/gemini-cli@$GEMINI_CLI_VERSION"

# Claude Code's postinstall replaces bin/claude.exe with the native binary; run it
# explicitly in case the npm configuration skipped install scripts.
claude_pkg="$dest/node_modules/@anthropic-ai/claude-code"
if ! "$dest/node_modules/.bin/claude" --version >/dev/null 2>&1; then
  (cd "$claude_pkg" && node install.cjs)
fi

for c in claude codex gemini; do
  printf '%s: ' "$c"
  HOME="$(mktemp -d)" "$dest/node_modules/.bin/$c" --version 2>/dev/null | head -1
done
echo "$want" > "$stamp"
echo "agent clients installed in $dest"
