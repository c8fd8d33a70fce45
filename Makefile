# bayescal: the two set-up commands are `make demo` and `make test`.
# Both create .venv with python3 if it is missing and install what they need.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= test,fast,dask,docs
STAMP  := $(VENV)/.installed

PYTEST_ARGS ?=

# PyTensor (Bayesian models): one compile cache reused by test, demo, bench and
# CI runs, so a model compiles once per machine (20-45 s cold, ~1 s warm).
# BLAS needs no setting: bayescal.bayes links PyTensor to the OpenBLAS inside
# SciPy's wheel (bayescal/bayes/_backend.py).
PYTENSOR_CACHE ?= $(HOME)/.cache/bayescal/pytensor
export PYTENSOR_FLAGS ?= base_compiledir=$(PYTENSOR_CACHE)

.PHONY: demo test lint install clean docs docs-check bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/bayescal demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

docs: $(STAMP)
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
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis docs/_build docs/api/generated
