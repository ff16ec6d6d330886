# dpbench: every target installs what it needs into .venv first.
#   make figures   run every experiment in experiments/ (full profile) and draw its figures
#   make test      the fast test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# Raw UCI files: ../shared/data on this project's machines, else ./data (ucimlrepo downloads there).
DPBENCH_DATA ?= $(if $(wildcard ../shared/data/SHA256SUMS),$(abspath ../shared/data),$(abspath data))
export DPBENCH_DATA
EXPERIMENTS := $(wildcard experiments/*.yaml)
STAMP := $(VENV)/.installed

.PHONY: install test figures verify clean-results help

help:
	@echo "make figures | make test | make verify | make install"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test,dask]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

figures: $(STAMP)
	@set -e; for spec in $(EXPERIMENTS); do \
		echo "== $$spec"; $(BIN)/dpbench run $$spec --jobs $(JOBS); \
	done

verify: $(STAMP)
	$(BIN)/dpbench data verify
