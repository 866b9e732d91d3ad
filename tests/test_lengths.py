"""Issue 35: every prompt is its target on the server, whatever its tokenizer (load/lengths.py),
and prompt_length_mismatch speaks only of the server's own counting.

The simulator's `--vocab syllable` cuts a word into pieces of up to three letters, so most of
benchy's filler words are several tokens there and none of its counts are o200k's. Each
request's length is judged against the simulator's truth log (what the server counted), not
against anything benchy computed.
"""

from __future__ import annotations

import json

import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.load import lengths
from benchy.load.plan import LoadSettings
from benchy.measure import tokenizer, unavailable
from benchy.sim import vocab
from benchy.workloads.scenario import sweep
from tests.test_checks import measured, run_cli, truth_of

PP = (64, 128, 300, 1000)


def bench(sim, pp=PP, runs=3, tokenizer_file=None, output=None) -> dict:
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url),
        cases=sweep(list(pp), [4], [1]),
        runs=runs,
        warmup=1,
        progress=False,
        tokenizer=tokenizer_file,
        output_dir=output,
        load=LoadSettings(),
    )
    return run_mod.execute(settings).to_dict()


def counted_by_server(sim, results: dict) -> dict[str, list[int]]:
    """Each case's measured requests as the simulator counted their prompts (its truth log)."""
    truth = truth_of(sim, results)
    return {c["label"]: [truth[r["request_id"]]["prompt_tokens"] for r in measured(c)] for c in results["cases"]}


def syllable_tokenizer_json(path) -> str:
    """A Hugging Face tokenizer.json that counts as the simulator's syllable vocabulary: its
    pieces (written here from vocab.py's rule, not imported) each one token."""
    tokenizers = pytest.importorskip("tokenizers")
    pieces = r"<\|[a-z]+\|>|</?think>| ?[A-Za-z]{1,3}| ?[0-9]| ?[^\sA-Za-z0-9]|\s+"
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pieces), behavior="isolated")
    file = path / "tokenizer.json"
    tok.save(str(file))
    return str(file)


def test_the_syllable_vocabulary_is_unlike_o200k():
    vocab.use("syllable")
    try:
        several = [w for w in tokenizer.filler_words() if vocab.count(" " + w) > 1]
        assert len(several) > len(tokenizer.filler_words()) / 2  # most words are several tokens
    finally:
        vocab.use("word")


def test_with_the_servers_tokenize_every_request_is_its_target(start_sim, tmp_path):
    sim = start_sim("--vocab", "syllable", "--instant")
    results = bench(sim, output=tmp_path)
    for case in results["cases"]:
        assert case["prompt_lengths"] == lengths.SERVER_TOKENIZE
        assert counted_by_server(sim, results)[case["label"]] == [case["pp"]] * 3
    fit = results["setup"]["calibration"]["lengths"]
    assert fit["method"] == lengths.SERVER_TOKENIZE
    assert lengths.MIN_BODY_WORDS <= fit["words"] < len(tokenizer.filler_words())  # the splitting words left out
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}
    assert "| Prompt lengths | exact: counted by the server's /tokenize" in (tmp_path / "report.md").read_text()


def test_without_tokenize_the_tokenizer_file_makes_every_request_its_target(start_sim, tmp_path):
    file = syllable_tokenizer_json(tmp_path)
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    results = bench(sim, tokenizer_file=str(tmp_path))  # a model folder holding tokenizer.json
    for case in results["cases"]:
        assert case["prompt_lengths"] == lengths.TOKENIZER_FILE
        assert counted_by_server(sim, results)[case["label"]] == [case["pp"]] * 3
    fit = results["setup"]["calibration"]["lengths"]
    assert fit["tokenizer_sha256"] == lengths.FileTokenizer(file).sha256


def test_without_tokenize_the_servers_usage_fits_the_words(start_sim):
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    results = bench(sim, pp=(128, 1000))
    assert results["setup"]["calibration"]["lengths"]["method"] == lengths.SERVER_USAGE
    for case in results["cases"]:
        assert case["prompt_lengths"] == lengths.SERVER_USAGE
        assert counted_by_server(sim, results)[case["label"]] == [case["pp"]] * 3


def test_a_tokenizer_that_keeps_no_word_whole_leaves_the_estimate_and_says_why(start_sim, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")  # a character each
    tok.save(str(tmp_path / "tokenizer.json"))
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--instant")
    results = bench(sim, pp=(128, 1000), tokenizer_file=str(tmp_path / "tokenizer.json"))
    fit = results["setup"]["calibration"]["lengths"]
    assert fit["method"] == lengths.O200K_CALIBRATED and fit["reason"].startswith("only 0 of")
    assert {c["prompt_lengths"] for c in results["cases"]} == {lengths.O200K_CALIBRATED}
    spread = {n for counts in counted_by_server(sim, results).values() for n in counts}
    assert spread - {128, 1000}  # the estimate misses on this server's vocabulary


def test_a_minority_counted_longer_qualifies_those_requests_not_the_case(start_sim):
    # A hidden system prompt of 5 tokens (under the o200k estimate's tolerance of 8) before one
    # request in 6: calibration's three never get it (the fit asks /tokenize, not completions).
    sim = start_sim("--hidden-prompt-tokens", "5", "--hidden-prompt-every", "6", "--instant")
    results = bench(sim, pp=(256,), runs=10)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    longer = {r["request_id"] for r in measured(case) if truth[r["request_id"]]["prompt_tokens"] != 256}
    flagged = {
        r["request_id"]
        for r in measured(case)
        if r["unavailable_codes"].get("prefill_tps") == unavailable.PROMPT_LENGTH_MISSED
    }
    assert longer and flagged == longer and 2 * len(longer) < len(measured(case))
    assert case["summary"]["prefill_tps"] is not None  # the others' figure stands
    (found,) = [w for w in results["warnings"] if w["code"] == "prompt_length_mismatch"]
    assert found["withheld"] == [] and f"{len(longer)} of 10" in found["message"]
    assert "more than the 256 sent" in found["message"] and "hidden system prompt" in found["hint"]


def test_a_truncated_prompt_says_fewer_and_why(start_sim):
    sim = start_sim("--preset", "truncating", "--instant")
    results = bench(sim, pp=(2048,), runs=2)
    (case,) = results["cases"]
    assert set(counted_by_server(sim, results)[case["label"]]) == {1024}
    (found,) = [w for w in results["warnings"] if w["code"] == "prompt_length_mismatch" and w["case"]]
    assert "fewer than the 2048 sent" in found["message"] and "prefill_tps" in found["withheld"]
    assert "context" in found["hint"]
    assert case["summary"]["prefill_tps"] is None


def test_a_bad_tokenizer_is_one_line_and_exit_2(capsys, tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    for where in (tmp_path / "missing", tmp_path):
        code, _, err = run_cli(capsys, "--base-url", "http://127.0.0.1:9/v1", "--tokenizer", str(where))
        assert code == 2 and "--tokenizer" in err and "Traceback" not in err
