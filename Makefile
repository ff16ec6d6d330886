# dpbench: every target installs what it needs into .venv first.
#   make figures   (DEVICE=gpu: the JAX path on a GPU, docs/gpu.md) fetch missing raw files (`dpbench data fetch`, a no-op when all are present), then run
#                  every experiment in experiments/ (full profile), draw its figures and build the report
#   make report    the static HTML report (results/index.html, one page per experiment) from the stored tables
#   make fetch     download the original UCI files missing from $(DPBENCH_DATA) (needs the network)
#   make test      the layer contracts, the docs site (--strict), `make check`, then the fast test suite (what CI runs)
#   make layers    the import contracts of pyproject.toml ([tool.importlinter]): layers import only downward, no cycle
#   make docs      the documentation site (mkdocs.yml, docs/) into site/
#   make check     every experiment's ci profile against its stored reference curves
#   make test-slow the paper-scale tests (marker `slow`), left out of make test
#   make bench-gpu on an NVIDIA GPU: install JAX's CUDA build, time the JAX path against the numpy path
#                  (`dpbench bench --device gpu`) and run the quickstart there (docs/gpu.md)
#   make install-peers the peers' extras (torch CPU + Opacus, diffprivlib, jax-privacy): `make figures` then runs
#                  experiments/peers.yaml too; make test-peers runs every peer's tests, the torch ones included
#   make bench-opacus  install the optional extra (torch + opacus), then compare dpbench's DP-SGD
#                  steps with Opacus (`dpbench bench --against opacus`, results/bench-opacus.json)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# pytest's worker processes in `make test` (pytest-xdist): CI's 2 cores; --dist loadfile keeps a module on one
# worker, so its module fixtures (a built site, Chromium, JAX's compiled shapes) are made once, not once per worker
TEST_WORKERS ?= 2
# Raw UCI files: ../shared/data when that folder exists (this project's machines, or a `dpbench data fetch` there), else ./data.
DPBENCH_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(abspath data))
export DPBENCH_DATA
# the paper experiments, and the plugin example (README, "Benchmark your own algorithm"); experiments/peers.yaml
# (dpbench against Opacus, jax-privacy and diffprivlib) only where the peers' extras are installed (`make install-peers`)
PEERS_READY := $(shell $(VENV)/bin/python -c "import opacus, diffprivlib, jax_privacy" >/dev/null 2>&1 && echo yes)
EXPERIMENTS := $(filter-out $(if $(PEERS_READY),,experiments/peers.yaml),$(wildcard experiments/*.yaml)) \
               examples/my_algorithm/experiment.yaml
STAMP := $(VENV)/.installed
# Python caches what it compiles (__pycache__, git-ignored) in every recipe, whatever the shell says: pip
# installs without byte-compiling its ~11,000 files (20 s), and each module the commands and tests import is
# compiled once, not again in every process (xdist workers, the CLI subprocesses of the tests)
unexport PYTHONDONTWRITEBYTECODE
# bench-opacus: torch pinned to the version whose CPU wheel pip finds on this project's machines,
# installed with the extra; the extra's plain `torch>=2.0` could otherwise pull a multi-GB CUDA build
TORCH ?= torch==2.13.0

.PHONY: install install-peers test-peers test test-slow pytest check layers docs figures report fetch verify bench bench-gpu bench-opacus help

help:
	@echo "make figures | make report | make fetch | make test (= layers + docs + check + pytest) | make check | make layers | make docs | make test-slow | make bench | make bench-gpu | make bench-opacus | make verify | make install | make install-peers | make test-peers"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e ".[test,dask,docs,jax,diffprivlib]"
	touch $(STAMP)

install: $(STAMP)

test: layers docs check pytest  # pytest last, so its summary closes the output

layers: $(STAMP)
	$(BIN)/lint-imports --no-cache

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir site

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

check: $(STAMP)
	$(BIN)/dpbench check $(EXPERIMENTS) --profile ci --jobs $(JOBS) --no-progress

# DEVICE=gpu: the JAX path's families (DP-SGD, DP-LSSGD, DP-GD, output and input perturbation) on the GPU, the rest on the
# CPU (docs/gpu.md; needs JAX's CUDA build: .venv/bin/pip install 'jax[cuda12]'); jax-cpu: the same on JAX's CPU build
DEVICE ?= cpu
figures: fetch  # --allow-large: the committed confirmatory seed counts give paper 003 ~75,000 cells
	$(BIN)/dpbench run $(EXPERIMENTS) --jobs $(JOBS) --allow-large --device $(DEVICE)
	$(BIN)/dpbench report $(EXPERIMENTS)

report: $(STAMP)
	$(BIN)/dpbench report $(EXPERIMENTS)

bench: $(STAMP)
	$(BIN)/dpbench bench
	OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 $(BIN)/dpbench bench --suite steps --output results/bench-blas2.json

# On a machine with an NVIDIA GPU (a few minutes): JAX's CUDA plugin, the JAX steps / many-trainings / audit
# suites beside the numpy path (results/bench-gpu.json), then the quickstart on the GPU (results-gpu/)
bench-gpu: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "jax[cuda12]"
	$(BIN)/dpbench bench --device gpu --output results/bench-gpu.json
	$(BIN)/dpbench run experiments/quickstart.yaml --device gpu --jobs 1 --results results-gpu --no-progress

# the peers' extras: torch's CPU build and Opacus, and jax-privacy (diffprivlib, the light one, comes with every target)
install-peers: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile $(TORCH) -e ".[opacus,diffprivlib,jax-privacy]"

# every peer's tests, the slow ones included (make test runs the diffprivlib ones; without their libraries the
# Opacus and jax-privacy tests skip there with the install command)
test-peers: install-peers
	$(BIN)/python -m pytest -q -m "slow or not slow" tests/algorithms/test_peer_opacus.py \
		tests/algorithms/test_peer_diffprivlib.py tests/algorithms/test_peer_jax_privacy.py tests/test_components.py -k "peer or opacus or jax_privacy or diffprivlib"

bench-opacus: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile $(TORCH) -e ".[opacus]"
	$(BIN)/dpbench bench --against opacus --output results/bench-opacus.json

fetch: $(STAMP)  # present verified files are neither downloaded nor written (../shared/data stays untouched)
	$(BIN)/dpbench data fetch

verify: $(STAMP)
	$(BIN)/dpbench data verify
