# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test test-fast install bench clean experiments

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,plots,service]"
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/shuffledp demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/frequency.py

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache
