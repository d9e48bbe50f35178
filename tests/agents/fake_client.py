"""A stand-in for an agent CLI, used to test process handling without a model.

Controlled by environment variables:

* ``FAKE_RECORD``: append one JSON line {argv, cwd, stdin, env} per invocation;
* ``FAKE_STREAM``: a JSONL file whose lines are printed to stdout;
* ``FAKE_MODE``: ``ok`` (default), ``truncate`` (drop the last line),
  ``garbage`` (a broken JSON line before the stream), ``exit3`` (print
  half the stream, an error on stderr, exit 3), ``sleep`` (print the first
  line, write our pid to FAKE_PID, sleep 60 s), ``version_fail``;
* ``FAKE_FAIL_TIMES`` + ``FAKE_COUNTER``: apply FAKE_MODE only to the first N
  invocations (counted in the FAKE_COUNTER file), then behave as ``ok``.
"""

import json
import os
import sys
import time

argv = sys.argv[1:]
mode = os.environ.get("FAKE_MODE", "ok")

if argv == ["--version"]:
    if mode == "version_fail":
        print("boom: cannot load runtime", file=sys.stderr)
        sys.exit(2)
    print("9.9.9 (fake client)")
    sys.exit(0)

stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()

counter = os.environ.get("FAKE_COUNTER")
if counter and os.environ.get("FAKE_FAIL_TIMES"):
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    with open(counter, "w") as fh:
        fh.write(str(n + 1))
    if n >= int(os.environ["FAKE_FAIL_TIMES"]):
        mode = "ok"

record = os.environ.get("FAKE_RECORD")
if record:
    keep = {k: v for k, v in os.environ.items()
            if k.startswith(("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "DISABLE_", "CLAUDE_", "KW_"))}
    with open(record, "a") as fh:
        fh.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "stdin": stdin, "env": keep}) + "\n")

lines = open(os.environ["FAKE_STREAM"]).read().splitlines() if os.environ.get("FAKE_STREAM") else []

if mode == "sleep":
    print(lines[0] if lines else "{}", flush=True)
    with open(os.environ["FAKE_PID"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(60)
    sys.exit(0)
if mode == "garbage":
    print('{"type": "assistant", "message": {"content": [', flush=True)
if mode == "truncate":
    lines = lines[:-1]
if mode == "exit3":
    for line in lines[: len(lines) // 2]:
        print(line)
    print("fatal: the model server went away", file=sys.stderr)
    sys.exit(3)
for line in lines:
    print(line)
sys.exit(0)
