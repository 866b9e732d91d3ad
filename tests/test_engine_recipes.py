"""docs/engines.md's quick starts run as written: each recipe's `benchy` line against the
simulator set up as that recipe's server line sets up its engine (context per slot, slots,
the model it serves, /metrics or not, llama.cpp's /props), and `--skip-unfit` for a sweep
whose longest prompt does not fit the context."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.conftest import REPO_ROOT, run_benchy_here

# Fast enough that a recipe's whole sweep takes seconds; the engine's shape, not its speed.
SPEED = ("--prefill-tps", "2000000", "--decode-tps", "20000")


def recipes() -> dict[str, tuple[str, str]]:
    """Section title → (its server command, its benchy line), from the page as users read it."""
    text = (REPO_ROOT / "docs" / "engines.md").read_text()
    found = {}
    for title, body in re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        block = re.search(r"```sh\n(.*?)```", body, re.S)
        if block is None:
            continue
        lines = block.group(1).replace("\\\n", " ").splitlines()
        benchy = [line for line in lines if re.match(r"(OPENAI_API_KEY=\S+ )?benchy ", line)]
        server = [line for line in lines if line not in benchy]
        found[title.replace(" (tested)", "")] = (" ".join(server), benchy[0])
    return found


def _flag(server: str, pattern: str) -> str:
    match = re.search(pattern, server)
    assert match, f"{pattern!r} not in {server!r}"
    return match.group(1)


def sim_like(title: str, server: str) -> list[str]:
    """The simulator's flags for that engine as its recipe starts it."""
    if title.startswith("vLLM"):  # max_model_len from the model (Qwen2.5-7B: 32,768)
        return ["--model", _flag(server, r"serve (\S+)"), "--max-running", _flag(server, r"--max-num-seqs (\d+)")]
    if title.startswith("SGLang"):
        return ["--model", _flag(server, r"--model-path (\S+)")]
    if title.startswith("llama.cpp"):  # -c is shared by the -np slots: /props says n_ctx per slot
        ctx, slots = int(_flag(server, r" -c (\d+)")), int(_flag(server, r" -np (\d+)"))
        return ["--flavor", "llamacpp", "--timings", "--context-length", str(ctx // slots), "--max-running", str(slots)]
    if title.startswith("Ollama"):
        return [
            "--model",
            "llama3.1:8b",
            "--context-length",
            _flag(server, r"OLLAMA_CONTEXT_LENGTH=(\d+)"),
            "--max-running",
            _flag(server, r"OLLAMA_NUM_PARALLEL=(\d+)"),
            "--no-metrics",
        ]
    if title.startswith("Text Generation Inference"):  # lists its model as `tgi`; tgi_ metric names
        return ["--model", "tgi", "--max-running", _flag(server, r"--max-concurrent-requests (\d+)"), "--no-metrics"]
    if title.startswith("LM Studio"):
        return ["--model", "MODEL-ID", "--max-running", "1", "--no-metrics"]
    raise AssertionError(f"a recipe this test does not know how to serve: {title}")


RECIPES = recipes()


def values(args: list[str], flag: str) -> list[int]:
    """The numbers a flag takes on a command line (`--pp 512 2048` → [512, 2048])."""
    if flag not in args:
        return []
    out = []
    for arg in args[args.index(flag) + 1 :]:
        if not arg.isdigit():
            break
        out.append(int(arg))
    return out


def test_the_page_has_a_recipe_for_each_engine_it_names():
    assert len(RECIPES) >= 6, sorted(RECIPES)


@pytest.mark.slow  # every recipe's whole sweep, report included: about a minute on two cores
@pytest.mark.parametrize("title", sorted(RECIPES))
def test_each_quick_start_runs_as_written_against_its_engine(start_sim, tmp_path, monkeypatch, title):
    server, line = RECIPES[title]
    sim = start_sim(*sim_like(title, server), *SPEED)
    if line.startswith("OPENAI_API_KEY="):
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        line = line.split(" ", 1)[1]
    args = shlex.split(line)[1:]
    args[args.index("--base-url") + 1] = sim.base_url
    args[args.index("-o") + 1] = str(tmp_path / "run")
    done = run_benchy_here(*args, "-q")
    assert done.returncode == 0, (line, done.stderr)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert not results["partial"] and not results["not_measured"]
    wanted = {(p, t, c) for p in values(args, "--pp") for t in values(args, "--tg") for c in values(args, "-c") or [1]}
    assert {(c["pp"], c["tg"], c["concurrency"]) for c in results["cases"]} == wanted
    served = [t for t in sim.truth() if t["request_id"]]
    assert served and all(t["status"] == 200 for t in served), {t["status"] for t in served}


def test_skip_unfit_runs_the_cases_that_fit_and_names_the_others(start_sim, tmp_path):
    """A 4,096-token context and `--pp 512 8192`: refused as a whole (saying --skip-unfit
    exists), or with --skip-unfit pp512 is measured and pp8192 listed as skipped, never sent."""
    sim = start_sim("--context-length", "4096", *SPEED)
    sweep = ("run", "--base-url", sim.base_url, "--pp", "512", "8192", "--tg", "8", "--runs", "2", "-q")
    refused = run_benchy_here(*sweep)
    assert refused.returncode == 2 and "--skip-unfit" in refused.stderr and "pp8192 tg8" in refused.stderr
    done = run_benchy_here(*sweep, "--skip-unfit", "-o", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [c["label"] for c in results["cases"]] == ["pp512 tg8"]
    [skipped] = results["not_measured"]
    assert skipped["case"] == "pp8192 tg8" and "--skip-unfit" in skipped["reason"] and "4,096" in skipped["reason"]
    assert not results["partial"]
    assert "not measured: pp8192 tg8 (skipped (--skip-unfit)" in done.stderr
    assert "- Not measured: pp8192 tg8 (skipped (--skip-unfit)" in (tmp_path / "run" / "report.md").read_text()
    assert max(t["prompt_tokens_sent"] or 0 for t in sim.truth()) < 4096  # nothing of pp8192 was sent
    # and when nothing fits, --skip-unfit still refuses: a run of no case is no run
    none_fit = run_benchy_here(*sweep[:4], "8192", "--tg", "8", "-q", "--skip-unfit")
    assert none_fit.returncode == 2 and "pp8192 tg8" in none_fit.stderr
