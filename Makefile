# dpbench: every target installs what it needs into .venv first.
#   make figures   fetch missing raw files (`dpbench data fetch`, a no-op when all are present), then run
#                  every experiment in experiments/ (full profile), draw its figures and build the report
#   make report    the static HTML report (results/index.html, one page per experiment) from the stored tables
#   make fetch     download the original UCI files missing from $(DPBENCH_DATA) (needs the network)
#   make test      the layer contracts, the docs site (--strict), `make check`, then the fast test suite (what CI runs)
#   make layers    the import contracts of pyproject.toml ([tool.importlinter]): layers import only downward, no cycle
#   make docs      the documentation site (mkdocs.yml, docs/) into site/
#   make check     every experiment's ci profile against its stored reference curves
#   make test-slow the paper-scale tests (marker `slow`), left out of make test
#   make bench-opacus  install the optional extra (torch + opacus), then compare dpbench's DP-SGD
#                  steps with Opacus (`dpbench bench --against opacus`, results/bench-opacus.json)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# Raw UCI files: ../shared/data when that folder exists (this project's machines, or a `dpbench data fetch` there), else ./data.
DPBENCH_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(abspath data))
export DPBENCH_DATA
# the paper experiments, and the plugin example (README, "Benchmark your own algorithm")
EXPERIMENTS := $(wildcard experiments/*.yaml) examples/my_algorithm/experiment.yaml
STAMP := $(VENV)/.installed
# bench-opacus: torch pinned to the version whose CPU wheel pip finds on this project's machines,
# installed with the extra; the extra's plain `torch>=2.0` could otherwise pull a multi-GB CUDA build
TORCH ?= torch==2.13.0

.PHONY: install test test-slow pytest check layers docs figures report fetch verify bench bench-opacus help

help:
	@echo "make figures | make report | make fetch | make test (= layers + docs + check + pytest) | make check | make layers | make docs | make test-slow | make bench | make bench-opacus | make verify | make install"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test,dask,docs]"
	touch $(STAMP)

install: $(STAMP)

test: layers docs check pytest  # pytest last, so its summary closes the output

layers: $(STAMP)
	$(BIN)/lint-imports --no-cache

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir site

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

check: $(STAMP)
	$(BIN)/dpbench check $(EXPERIMENTS) --profile ci --jobs $(JOBS) --no-progress

figures: fetch  # --allow-large: the committed seed counts (`dpbench decide`) give paper 003 ~80,000 cells
	$(BIN)/dpbench run $(EXPERIMENTS) --jobs $(JOBS) --allow-large
	$(BIN)/dpbench report $(EXPERIMENTS)

report: $(STAMP)
	$(BIN)/dpbench report $(EXPERIMENTS)

bench: $(STAMP)
	$(BIN)/dpbench bench
	OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 $(BIN)/dpbench bench --suite steps --output results/bench-blas2.json

bench-opacus: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(TORCH) -e ".[opacus]"
	$(BIN)/dpbench bench --against opacus --output results/bench-opacus.json

fetch: $(STAMP)  # present verified files are neither downloaded nor written (../shared/data stays untouched)
	$(BIN)/dpbench data fetch

verify: $(STAMP)
	$(BIN)/dpbench data verify
