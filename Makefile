# bayescal: the two set-up commands are `make demo` and `make test`.
#
# `make test` (what CI runs) lints, then runs the whole test suite once on each
# supported stack, each in its own virtual environment, created from scratch
# when missing:
#
#   .venv     Python 3.11      PyMC 5, ArviZ 0.2x, PyTensor 2   make test-pymc5
#   .venv312  Python >= 3.12   PyMC 6, ArviZ 1.x, PyTensor 3    make test-pymc6
#                              (the newest releases the installer resolves)
#
# The interpreters are found by .ci/find-python (pyenv's versions, then
# python3.11 / python3.12 on PATH); name them with PYTHON=... / PYTHON_NEW=...
# `make demo` and `make docs` use .venv.

PYTHON     ?=
PYTHON_NEW ?=
VENV       ?= .venv
VENV_NEW   ?= .venv312
EXTRAS     ?= test,fast,dask,docs
BIN        := $(VENV)/bin
BIN_NEW    := $(VENV_NEW)/bin
STAMP      := $(VENV)/.installed
STAMP_NEW  := $(VENV_NEW)/.installed

# Two pytest-xdist workers (the CI machine has two cores); the docs build and
# the notebook tests that read it share one worker (xdist_group "docs", handed
# out first), as do the tests of one module that share a fitted model
# (tests/conftest.py).
PYTEST_ARGS ?= -n 2 --dist loadgroup -rs

# PyTensor (Bayesian models): one compile cache reused by test, demo, bench and
# CI runs, so a model compiles once per machine (C code on PyTensor 2, Numba on
# PyTensor 3; each keeps its own subfolder). BLAS needs no setting:
# bayescal.bayes._backend links PyTensor 2 to the OpenBLAS inside SciPy's wheel.
PYTENSOR_CACHE ?= $(HOME)/.cache/bayescal/pytensor
export PYTENSOR_FLAGS ?= base_compiledir=$(PYTENSOR_CACHE)
# JAX's persistent cache of the compiled sampler's programs (bayescal.bayes.compiled),
# in the same folder so that PYTENSOR_CACHE=$$(mktemp -d) makes every cache cold.
export BAYESCAL_JAX_CACHE ?= $(PYTENSOR_CACHE)/jax

# The extras fast (nutpie, numpyro) and dask are installed here, so their tests
# must run: a missing one fails instead of being skipped (tests/_extras.py).
export BAYESCAL_REQUIRE_EXTRAS = 1

# Packages go into each venv with uv (installed there by the venv's pip, from
# PyPI), which fetches and unpacks them in parallel, and writes no bytecode.
# Each module is compiled to a .pyc by the first process that imports it: make's
# recipes run with PYTHONDONTWRITEBYTECODE unset (this project's machines set it,
# and then every worker, notebook kernel and CLI process would compile its
# imports from source: importing PyMC, JAX and ArviZ 12-14 s against 3-6 s).
# Compiling every installed module up front (uv's --compile-bytecode, as pip
# does) took 67 s for both venvs, fresh, on this 2-core machine, against 23 s
# without; the modules the tests import then cost one compilation each, about
# 8-10 CPU s a venv (docs/benchmarks.md, *The test command's own cost*).
unexport PYTHONDONTWRITEBYTECODE
# INSTALLER=pip installs with pip instead: pip reads pip.conf's index settings,
# uv reads its own (UV_INDEX_URL, uv.toml).
INSTALLER ?= uv
ifeq ($(INSTALLER),pip)
venv_install = $(1)/python -m pip install -q
else ifeq ($(INSTALLER),uv)
venv_install = $(1)/python -m pip install -q uv && \
  $(1)/python -m uv pip install -q --python $(1)/python
else
$(error INSTALLER must be uv or pip; got '$(INSTALLER)')
endif

# Print the interpreter and the versions resolved, and stop unless PyMC has
# major version $(1): each venv must really hold its stack.
stack_check = import importlib.metadata as m, sys; \
  v = {d: m.version(d) for d in ("pymc", "arviz", "pytensor", "numpy", "scipy", "scikit-learn")}; \
  print("stack: Python", sys.version.split()[0], " ".join(f"{d} {x}" for d, x in v.items())); \
  sys.exit(0 if v["pymc"].startswith("$(1).") else f"expected PyMC $(1).x in {sys.prefix}")

.PHONY: demo test test-pymc5 test-pymc6 lint install install-new install-both clean docs docs-check bench

$(BIN)/python:
	@py="$(PYTHON)"; [ -n "$$py" ] || py=$$(.ci/find-python 3.11) || exit 1; \
	echo "creating $(VENV) with $$py"; "$$py" -m venv $(VENV)

$(BIN_NEW)/python:
	@py="$(PYTHON_NEW)"; [ -n "$$py" ] || py=$$(.ci/find-python 3.12+) || exit 1; \
	echo "creating $(VENV_NEW) with $$py"; "$$py" -m venv $(VENV_NEW)

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(call venv_install,$(BIN)) -e ".[$(EXTRAS)]"
	touch $@

# --upgrade: the newest PyMC / ArviZ / PyTensor the pins allow, also in an old venv
$(STAMP_NEW): pyproject.toml Makefile | $(BIN_NEW)/python
	$(call venv_install,$(BIN_NEW)) --upgrade -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

install-new: $(STAMP_NEW)

demo: $(STAMP)
	$(BIN)/bayescal demo

lint: $(STAMP)
	$(BIN)/ruff check .

# Both environments are installed first, side by side (downloads and unpacking
# wait on the network and the disk more than on the CPU), then each stage runs.
test: install-both lint test-pymc5 test-pymc6

install-both:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(STAMP_NEW)

test-pymc5: $(STAMP)
	$(BIN)/python -c '$(call stack_check,5)'
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Tests marked `once` (pyproject.toml: the docs build and notebooks, the seeded SBC
# of the JAX sampler, the JAX sampler's posterior checks against the PyMC model and
# between its coordinates, two more) run in the PyMC 5 stage only; pytest reports
# them here as deselected.
test-pymc6: $(STAMP_NEW)
	$(BIN_NEW)/python -c '$(call stack_check,6)'
	@echo "PyMC 6 stage: the tests marked 'once' ran in the PyMC 5 stage; pytest counts them as deselected here"
	$(BIN_NEW)/python -m pytest $(PYTEST_ARGS) -m "not once"

docs: $(STAMP)
	@echo "make docs: sphinx -W builds docs/_build/html and executes the three notebooks and"
	@echo "the six gallery examples (no time limit per cell; about 3 minutes on a quiet 2-core"
	@echo "machine: 153-160 s for the notebooks, about 40 s for the examples; a rerun executes"
	@echo "only changed pages)"
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

# The built site and the demo report as a reader sees them, offline: headless
# Chromium (apt-get install chromium chromium-driver) loads every page, checks
# that math is typeset, no code is cut off and every image shows, and writes a
# screenshot of each page to docs/_build/screenshots/ (see docs/check_site.py).
docs-check: docs
	$(BIN)/bayescal demo --report docs/_build/demo-report --no-progress > /dev/null
	$(BIN)/python docs/check_site.py --html docs/_build/html \
		--report docs/_build/demo-report/report.html --screenshots docs/_build/screenshots

clean:
	rm -rf $(VENV) $(VENV_NEW) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis docs/_build docs/api/generated
