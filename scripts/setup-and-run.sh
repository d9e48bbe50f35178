#!/usr/bin/env bash
# Purpose: set up (or reuse) .venv, then run the tests or the main job (make test / make bench, CI).
#
# The README's two Quick start commands: the Makefile's targets and .ci/run call this script.
# `--help` for the details.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/setup-and-run.sh test  [PYTEST_ARGS...]    (make test  ARGS="...")
       scripts/setup-and-run.sh bench [BENCH_ARGS...]     (make bench ARGS="...")

Sets up a virtual environment in .venv (created, or reused when it is there), then:

  test   installs torch (the CPU build), kernelwright with its [test,ray] extras and, when
         node >= 20 and npm are present, the real agent CLIs (tests/agents/install_clients.sh);
         then runs `python -m pytest -q PYTEST_ARGS...`.  CPU only is fine; CI runs this.
  bench  installs torch and kernelwright with its [gpu] extra, then on a CUDA machine runs
         `kernelwright bench BENCH_ARGS...` (all 170 contest workloads); without a GPU (no
         nvidia-smi, or torch.cuda unavailable) it says so and runs the CPU demo instead:
         `kernelwright bench --device cpu --quick -d demo BENCH_ARGS...` (seconds).

torch: an installed torch >= 2.8 in .venv is kept.  Otherwise, for the CPU build, a dry run asks
pip which wheel a plain `pip install torch==2.13.0` would pick: a CPU wheel (a mirror or local
wheels that serve one, or macOS/Windows) is installed that way; a CUDA build (PyPI on Linux) or
no match makes it use the CPU index instead (--index-url https://download.pytorch.org/whl/cpu).

A second run is quick: the pip steps are skipped while .venv's stamp matches pyproject.toml
(and the torch line and extras); the agent CLIs have their own stamp.

Environment:
  PYTHON=python3             interpreter that creates .venv (Python >= 3.10)
  KW_VENV=.venv              where the virtual environment lives
  KW_TORCH=torch==2.13.0     the torch requirement to install when .venv has none
  KW_TORCH_CPU_INDEX=URL     the CPU index of the fallback (default the one above)
  KW_REQUIRE_REAL_CLIENTS=1  (CI) fail, instead of skipping, when the agent CLIs cannot be installed
  KW_SKIP_CLIENTS=1          do not install the agent CLIs (no network; their tests skip)
EOF
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

mode="${1:-}"
case "$mode" in
  -h|--help|help) usage; exit 0 ;;
  test|bench) shift ;;
  "") usage >&2; exit 2 ;;
  *) echo "[setup] unknown command '$mode' (test or bench)" >&2; usage >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3}"
VENV="${KW_VENV:-$repo/.venv}"
TORCH_SPEC="${KW_TORCH:-torch==2.13.0}"
CPU_INDEX="${KW_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
version_ok='import sys; sys.exit(not (3, 10) <= sys.version_info[:2] < (3, 13))'

# --- the virtual environment ------------------------------------------------------------
if [[ -x "$VENV/bin/python" ]]; then
  "$VENV/bin/python" -c "$version_ok" 2>/dev/null \
    || die "$VENV is there but its python does not run or is not Python 3.10-3.12: remove it (rm -rf $VENV) and run again"
  say "using existing ${VENV#"$repo"/} ($("$VENV/bin/python" -V 2>&1))"
else
  [[ -e "$VENV" ]] && die "$VENV is there but has no bin/python: remove it (rm -rf $VENV) and run again"
  command -v "$PYTHON" >/dev/null || die "$PYTHON not found (Python 3.10-3.12 needed; set PYTHON=...)"
  "$PYTHON" -c "$version_ok" || die "$PYTHON is $("$PYTHON" -V 2>&1); Python 3.10-3.12 needed (set PYTHON=...)"
  say "creating ${VENV#"$repo"/} with $PYTHON ($("$PYTHON" -V 2>&1))"
  "$PYTHON" -m venv "$VENV" || die "'$PYTHON -m venv' failed (on Debian/Ubuntu: apt install python3-venv)"
fi
# what `activate` does: kernelwright, pytest and the tests' subprocesses find the venv's tools
export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH"
unset PYTHONHOME
py() { "$VENV/bin/python" "$@"; }

# --- torch ------------------------------------------------------------------------------
build_py='import torch; c = torch.version.cuda; print(torch.__version__, "(CPU build)" if c is None else f"(CUDA {c} build)")'
torch_build() {  # "2.13.0+cpu (CPU build)" / "2.11.0+cu130 (CUDA 13.0 build)"; fails without torch
  py -c "$build_py" 2>/dev/null
}

torch_kept() {  # an installed torch >= 2.8 (the package's requirement) stays
  local have
  have="$(torch_build)" || return 1
  py -c 'import sys, torch; sys.exit(tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 8))' \
    || { say "torch: installed $have is older than 2.8; replacing it"; return 1; }
  say "torch: keeping installed $have"
}

# which build would a plain `pip install $TORCH_SPEC` pick?  prints "cpu VERSION", "cuda VERSION" or "none"
plain_torch_build() {
  local tmp verdict="none"
  tmp="$(mktemp -d)"
  # --no-deps: only torch's own metadata (where an index serves no separate metadata file, pip
  # fetches the torch wheel itself for it, but never the nvidia-* wheels)
  if py -m pip install -q --dry-run --no-deps --ignore-installed --report "$tmp/report.json" \
        "$TORCH_SPEC" >"$tmp/log" 2>&1; then
    verdict="$(py - "$tmp/report.json" <<'EOF'
import json, sys
items = [i for i in json.load(open(sys.argv[1]))["install"] if i["metadata"]["name"].lower() == "torch"]
if not items:
    print("none"); sys.exit()
meta = items[0]["metadata"]
version = meta["version"]
local = version.partition("+")[2]
if local:  # 2.13.0+cpu, +cu130, +rocm6.4, +xpu
    print(("cpu" if local == "cpu" else "cuda"), version); sys.exit()
try:
    from pip._vendor.packaging.requirements import Requirement
except ImportError:
    Requirement = None
cuda = False
for line in meta.get("requires_dist") or []:
    if Requirement is None:
        cuda = cuda or line.lower().startswith(("nvidia-", "cuda-"))
        continue
    req = Requirement(line)
    if req.name.lower().startswith(("nvidia-", "cuda-")) and (req.marker is None or req.marker.evaluate({"extra": ""})):
        cuda = True
print("cuda" if cuda else "cpu", version)
EOF
)" || verdict="none"
  fi
  rm -rf "$tmp"
  echo "$verdict"
}

install_torch_cpu() {
  torch_kept && return 0
  say "torch: asking pip which build 'pip install $TORCH_SPEC' would pick (dry run)"
  local verdict
  verdict="$(plain_torch_build)"
  case "$verdict" in
    cpu*)
      say "torch: CPU build via default index (${verdict#cpu })"
      py -m pip install -q "$TORCH_SPEC" ;;
    cuda*)
      say "torch: the default index would install a CUDA build (${verdict#cuda }); CPU build via $CPU_INDEX"
      py -m pip install -q --index-url "$CPU_INDEX" "$TORCH_SPEC" \
        || die "torch: the CPU index $CPU_INDEX failed (behind a mirror: install a CPU wheel of $TORCH_SPEC into $VENV, or set KW_TORCH_CPU_INDEX)" ;;
    *)
      say "torch: the default index has no $TORCH_SPEC; CPU build via $CPU_INDEX"
      py -m pip install -q --index-url "$CPU_INDEX" "$TORCH_SPEC" \
        || die "torch: no $TORCH_SPEC on the default index nor on $CPU_INDEX (set KW_TORCH or KW_TORCH_CPU_INDEX)" ;;
  esac
  say "torch: installed $(torch_build)"
}

install_torch_default() {  # a GPU machine: the default index's build (PyPI: CUDA on Linux)
  torch_kept && return 0
  say "torch: $TORCH_SPEC via default index (PyPI's Linux wheel is the CUDA build; to pick another, install torch into $VENV first)"
  py -m pip install -q "$TORCH_SPEC"
  say "torch: installed $(torch_build)"
}

# --- the package: skipped while the stamp matches ----------------------------------------
setup_packages() {  # $1: extras, $2: torch route (cpu / default)
  local extras="$1" route="$2" pyhash key stamp have
  pyhash="$(py -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' pyproject.toml)"
  key="v1 extras=$extras torch=$TORCH_SPEC route=$route pyproject=$pyhash"
  stamp="$VENV/.kw-setup-$mode"
  # the stamp matches, torch imports and kernelwright is this checkout's editable install
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]] \
     && have="$(py -c "import sys, kernelwright; assert kernelwright.__file__.startswith(sys.argv[1]); $build_py" \
                  "$repo/src/" 2>/dev/null)"; then
    say "packages: up to date (pyproject.toml unchanged since the last install; torch $have), skipping pip"
    return 0
  fi
  rm -f "$stamp"
  py -m pip install -q --upgrade pip || say "pip: upgrade failed, keeping $(py -m pip --version | cut -d' ' -f1-2)"
  if [[ "$route" == cpu ]]; then install_torch_cpu; else install_torch_default; fi
  say "packages: pip install -e \".[$extras]\""
  py -m pip install -q -e ".[$extras]"
  echo "$key" >"$stamp"
}

# --- the real agent CLIs (test only) -----------------------------------------------------
setup_clients() {
  local required="${KW_REQUIRE_REAL_CLIENTS:-}"
  if [[ -n "${KW_SKIP_CLIENTS:-}" && -z "$required" ]]; then
    say "agent CLIs: skipped (KW_SKIP_CLIENTS is set); the real-client tests will skip"
    return 0
  fi
  if command -v node >/dev/null && command -v npm >/dev/null \
     && node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' 2>/dev/null; then
    if bash tests/agents/install_clients.sh; then return 0; fi
    [[ -n "$required" ]] && die "agent CLIs: tests/agents/install_clients.sh failed (KW_REQUIRE_REAL_CLIENTS is set)"
    say "agent CLIs: install failed (above); the real-client tests will skip"
  else
    [[ -n "$required" ]] && die "agent CLIs: node >= 20 and npm are needed (KW_REQUIRE_REAL_CLIENTS is set)"
    say "agent CLIs: skipped (node >= 20 and npm not found); the real-client tests will skip"
  fi
}

# --- the two commands --------------------------------------------------------------------
if [[ "$mode" == test ]]; then
  setup_packages "test,ray" cpu   # ray: the cluster backend's local-mode tests
  setup_clients
  say "running: python -m pytest -q${*:+ $*}"
  exec "$VENV/bin/python" -m pytest -q "$@"
fi

# bench
gpus=""
if command -v nvidia-smi >/dev/null; then
  gpus="$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)"
  why="nvidia-smi lists no GPU"
else
  why="nvidia-smi not found"
fi
if [[ -n "$gpus" ]]; then
  setup_packages gpu default
  if py -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    say "GPU: $(echo "$gpus" | head -1 | cut -d'(' -f1)($(echo "$gpus" | wc -l | tr -d ' ') in all); running: kernelwright bench${*:+ $*}"
    exec kernelwright bench "$@"
  fi
  build="$(torch_build || echo '?')"
  if [[ "$build" == *"CPU build"* ]]; then
    why="torch $build in ${VENV#"$repo"/} cannot use the GPU (for the GPU job: $VENV/bin/pip install --force-reinstall $TORCH_SPEC --index-url https://download.pytorch.org/whl/cu130, or the CUDA build that fits your driver, then run again)"
  else
    why="torch.cuda.is_available() is False with torch $build (driver, CUDA_VISIBLE_DEVICES?)"
  fi
else
  setup_packages gpu cpu
fi
say "no usable GPU: $why"
say "running the CPU demo instead: kernelwright bench --device cpu --quick -d demo${*:+ $*}"
exec kernelwright bench --device cpu --quick -d demo "$@"
