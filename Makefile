# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test test-fast install bench bench-peers peers-venv clean

# PyTorch's CPU build goes in first (the ml and gpu extras then install nothing more of it); on a
# machine without the local wheel pip downloads torch 2.13.0 from PyPI.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[dev,plots,service,crosscheck,docs,ml,gpu,data]"
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/shuffledp demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/frequency.py --markdown docs/benchmarks-frequency.md

# Peer libraries need their own venv: they break on numpy >= 2.3 and xxhash >= 4.
peers-venv:
	@test -x .venv-peers/bin/python || $(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install -q "numpy<2.3" "xxhash<4" scipy scikit-learn statsmodels pure-ldp multi-freq-ldpy

bench-peers: $(STAMP) peers-venv
	$(BIN)/python benchmarks/frequency.py --peers --markdown docs/benchmarks-frequency.md

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache
