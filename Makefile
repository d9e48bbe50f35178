# The README's two Quick start commands; both call scripts/setup-and-run.sh, which creates or
# reuses .venv (`make help` for what it installs).  Extra arguments: make test ARGS="-k gate -x"
ARGS ?=

.PHONY: help test bench

help:
	@bash scripts/setup-and-run.sh --help

test:   ## set up .venv and run the tests (CPU only is fine; what CI runs)
	@bash scripts/setup-and-run.sh test $(ARGS)

bench:  ## set up .venv and run kernelwright bench (without a GPU: the CPU demo)
	@bash scripts/setup-and-run.sh bench $(ARGS)
