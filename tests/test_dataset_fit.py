"""Fitted dataset prompts (--dataset FILE --pp …) at exact lengths on a vocabulary unlike
o200k (load/dataset_fit.py): the simulator's `--vocab syllable` cuts words into pieces of up to
three letters, so real text counts there nothing like benchy's o200k. Every request's length is
judged against the simulator's truth log (what the server counted), never against benchy's
own counts."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from benchy.load import dataset_fit, lengths
from benchy.load.dataset_load import DatasetPrompts
from benchy.load.prompts import Calibration, PromptFactory
from benchy.measure import evidence
from benchy.workloads import dataset
from benchy.workloads.case import Case
from benchy.workloads.scenario import load_scenario
from tests.conftest import run_benchy_here
from tests.test_checks import measured, truth_of
from tests.test_lengths import syllable_tokenizer_json

PP = ("96", "700")


def run(sim, out, *flags: str) -> dict:
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--dataset", "sample", "--pp", *PP,
        "--tg", "4", "--runs", "3", *flags,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def served(sim, results: dict) -> dict[int, list[int]]:
    """Each case's requests (warmups too) as the simulator counted their prompts."""
    truth = truth_of(sim, results)
    return {
        c["pp"]: [truth[r["request_id"]]["prompt_tokens"] for r in c["requests"] if r["status"] == "ok"]
        for c in results["cases"]
    }


def assert_exact(sim, results: dict, method: str) -> None:
    counted = served(sim, results)
    for case in results["cases"]:
        assert len(measured(case)) == 3 * case["concurrency"]
        target = case["pp"] + case.get("depth", 0)
        assert counted[case["pp"]] == [target] * len(case["requests"]), case["label"]
        assert case["prompt_lengths"] == method
        # the case's own requests (the queueing check's alone ones are filler, load/alone.py)
        assert {r["prompt_slack"] for r in case["requests"] if not r.get("alone")} == {evidence.EXACT_PROMPT_SLACK}
    assert results["setup"]["dataset"]["lengths"] == {c["label"]: method for c in results["cases"]}
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}


def test_with_the_servers_tokenize_every_fitted_request_is_its_target(start_sim, tmp_path):
    sim = start_sim("--vocab", "syllable", "--instant")
    assert_exact(sim, run(sim, tmp_path / "out"), lengths.SERVER_TOKENIZE)


def test_worker_processes_and_a_cold_depth_take_the_same_exact_bodies(start_sim, tmp_path):
    sim = start_sim("--vocab", "syllable", "--instant")
    results = run(sim, tmp_path / "out", "--workers", "2", "-c", "2", "--depth", "200")
    assert {c["depth"] for c in results["cases"]} == {200}
    assert_exact(sim, results, lengths.SERVER_TOKENIZE)


def test_with_a_tokenizer_file_and_no_tokenize_every_fitted_request_is_its_target(start_sim, tmp_path):
    syllable_tokenizer_json(tmp_path)
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    assert_exact(sim, run(sim, tmp_path / "out", "--tokenizer", str(tmp_path)), lengths.TOKENIZER_FILE)


def test_with_only_usage_every_fitted_request_is_its_target(start_sim, tmp_path):
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    assert_exact(sim, run(sim, tmp_path / "out"), lengths.SERVER_USAGE)


def test_without_an_exact_source_the_cuts_say_they_are_an_estimate(start_sim, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")  # a character each
    tok.save(str(tmp_path / "tokenizer.json"))
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    results = run(sim, tmp_path / "out", "--tokenizer", str(tmp_path / "tokenizer.json"))
    assert {c["prompt_lengths"] for c in results["cases"]} == {lengths.O200K_CALIBRATED}
    assert set(results["setup"]["dataset"]["lengths"].values()) == {lengths.O200K_CALIBRATED}
    # an estimate is not held to the exact slack
    assert {r["prompt_slack"] for c in results["cases"] for r in c["requests"]} == {None}


def test_a_body_is_a_cut_of_the_entries_from_its_start(tmp_path):
    """The table's bodies are the entries' own text, from their start on, at the count asked
    (counted here by the same tokenizer file, the one source that needs no server)."""
    counter = lengths.FileTokenizer(syllable_tokenizer_json(tmp_path))
    texts = [e.prompt for e in dataset.load("sample").entries]
    starts = dataset_fit.start_pool(len(texts), seed=0)
    bodies = asyncio.run(dataset_fit.fit_bodies(counter, texts, starts, [40, 900]))
    assert len(bodies) > len(starts)  # of both lengths, from most starts
    for (start, tokens), body in bodies.items():
        assert counter.count_now([dataset_fit.NONCE_SEPARATOR + body]) == [tokens]
        assert body.startswith(texts[start][:20]) and not body[-1].isspace()  # none ends at a template's join


def test_prompts_are_led_by_their_nonce_and_take_a_tabled_body(tmp_path):
    counter = lengths.FileTokenizer(syllable_tokenizer_json(tmp_path))
    fit = asyncio.run(lengths.fit_words(counter))
    base = PromptFactory(Calibration(lengths=fit), salt="t")
    spec = dataset.DatasetSpec("sample", mode="fitted")
    tokens = dataset_fit.body_tokens(Case(pp=300, tg=1), base.calibration, nonce=True)
    texts = [e.prompt for e in dataset.load("sample").entries]
    bodies = asyncio.run(dataset_fit.fit_bodies(counter, texts, dataset_fit.start_pool(len(texts), 0), [tokens]))
    maker = DatasetPrompts(base, dataclasses.replace(spec, bodies=bodies, lengths=counter.method), seed=0)
    prompts = [maker.build(300) for _ in range(40)]
    assert counter.count_now([p.text for p in prompts]) == [300] * 40
    assert len({p.nonce for p in prompts}) == 40 and all(p.text.startswith(p.nonce) for p in prompts)
    assert len({p.text[len(p.nonce) :] for p in prompts}) > 10  # bodies from many starts


def test_an_entry_short_of_the_rest_but_over_it_with_its_blank_line_is_still_cut_exactly():
    """A counter whose blank line is two tokens (a small BPE's "\\n\\n" is not one): the
    next entry alone is short of what is left, with its blank line over it."""

    def count(text: str) -> int:
        return len(text.split(" ")) + text.count("\n") if text else 0  # a word, or a newline, a token

    texts = ["a b c d e", "f g h", "i j k l m n o p"]
    for tokens in range(1, 30):
        body = dataset.cut_entries(texts, 0, tokens, count)
        assert count(body) == tokens, (tokens, body)


def test_a_scenario_file_names_its_dataset_and_its_keys_choose_the_mode(start_sim, tmp_path):
    (tmp_path / "own.jsonl").write_text(
        "".join(json.dumps({"prompt": e.prompt}) + "\n" for e in dataset.load("sample").entries), encoding="utf-8"
    )
    fitted = tmp_path / "fitted.toml"  # the file found beside the scenario, not in the working folder
    fitted.write_text('dataset = "own.jsonl"\npp = [96, 700]\ntg = 4\nruns = 3\n', encoding="utf-8")
    sim = start_sim("--vocab", "syllable", "--instant")
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "out"), "--scenario", str(fitted)
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["setup"]["dataset"]["mode"] == "fitted" and results["setup"]["dataset"]["name"] == "own.jsonl"
    assert_exact(sim, results, lengths.SERVER_TOKENIZE)

    natural = tmp_path / "natural.toml"
    natural.write_text('dataset = "sample"\ntg = 4\nconcurrency = [1, 2]\n', encoding="utf-8")
    cases = load_scenario(str(natural))
    assert [(c.kind, c.concurrency, c.dataset.mode) for c in cases] == [
        (k, n, "natural") for k, n in (("dataset", 1), ("dataset", 2))
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text('dataset = "sample"\ndepth = 512\n', encoding="utf-8")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--scenario", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"benchy: error: {bad}")
