# benchy's entry points. `make demo` and `make test` work on a fresh machine with Python ≥ 3.10.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast test-realserver bench-client clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,realserver]'
	touch $(STAMP)

# The main job against the embedded simulator (a DGX Spark serving gpt-oss-120b): no GPU needed.
demo: install
	$(BIN)/benchy demo --output reports/demo

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not realserver"

test-realserver: install
	$(BIN)/python -m pytest -q -m realserver

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache reports/demo
