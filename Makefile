# benchy's entry points. `make demo` and `make test` work on a fresh machine with Python ≥ 3.10.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast test-realserver lint bench-client schema clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,realserver,dev]'
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

# The style and types CI holds the tree to (config in pyproject.toml); `ruff format` fixes the first.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy benchy

# benchy's own cost per streamed token, TTFT accuracy and --workers scaling against the instant
# simulator (a benchmark, not a test; a few minutes). LLAMA_BENCHY=path/to/llama-benchy adds it
# side by side; BENCH_CLIENT_ARGS="--sims 8 --sim-cores 2-15" on a machine with cores to spare.
bench-client: install
	$(BIN)/python benchmarks/bench_client.py $(BENCH_CLIENT_ARGS)

# The JSON Schema of results.json, generated from the typed results (tests/test_schema.py checks it).
schema: install
	$(BIN)/python -c "from benchy.results import write_schema; print(write_schema())"

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache reports/demo
