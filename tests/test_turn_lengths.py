"""A later turn's prompt length is a guess over a history the server renders and counts (issue 51:
a decision made in the plan, consumed by the row's length check): real HTTP against `benchy
sim`, judged by its truth log.

The simulator's history disagrees with "previous prompt + completion tokens + new message" the
ways real servers do: its chat template wraps each message (`<|start|>assistant<|message|>` …
`<|end|>`), `--output fillers` answers with special tokens that come back as several tokens each
when resent as text (a random-weight gpt-oss), and `--reasoning-tokens` makes a reasoning model
whose reasoning the history drops (with or without --keep-reasoning: its template renders
reasoning after the last user message only). None of that is a prompt the server cut or padded,
so no turn may lose its prefill rate to it; a server that keeps only the last N tokens
(--preset truncating) still must.
"""

from __future__ import annotations

import pytest

from benchy.measure import evidence, unavailable
from benchy.sim import prose, vocab
from tests.conftest import run_json, warning_codes

TURNS = ("--turns", "3", "-c", "2", "--warmup", "0")

DISAGREEING = [
    pytest.param(("--output", "fillers"), ("--pp", "256", "--tg", "32"), id="answer-retokenizes-longer"),
    pytest.param(("--reasoning-tokens", "100"), ("--pp", "256", "--tg", "128"), id="reasoning-dropped"),
    pytest.param(
        ("--reasoning-tokens", "480"), ("--pp", "256", "--tg", "512"), id="long-reasoning-dropped"
    ),  # hundreds fewer
    pytest.param(
        ("--reasoning-tokens", "100"),
        ("--pp", "256", "--tg", "128", "--keep-reasoning"),
        id="reasoning-kept-but-unrendered",
    ),
    # all reasoning: nothing resent but the template's wrappers of an empty answer
    pytest.param(("--reasoning-tokens", "1000"), ("--pp", "64", "--tg", "32"), id="nothing-resent"),
    pytest.param(
        ("--output", "fillers", "--vocab", "syllable"), ("--pp", "256", "--tg", "32"), id="fillers-foreign-vocab"
    ),
]


def turns_of(sim, results: dict) -> tuple[list[dict], dict[str, dict]]:
    """The conversations' measured rows and the truth of each, by request id."""
    (case,) = results["cases"]
    rows = [r for r in case["requests"] if not r["warmup"] and not r["control"]]
    truth = {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}
    return rows, truth


def old_guess_missed(rows: list[dict], truth: dict[str, dict]) -> bool:
    """Whether the guess benchy used to make (previous prompt + its completion tokens + the new
    message, judged by the estimate's tolerance) misses some turn's truth: the sim disagrees."""
    by_turn = {(r["conversation"], r["turn"]): r for r in rows}
    for (conversation, turn), row in by_turn.items():
        before = by_turn.get((conversation, turn - 1))
        if before is None:
            continue
        old = before["prompt_tokens"] + before["completion_tokens"] + row["unique_tokens"]
        if evidence.prompt_length_missed(old, truth[row["request_id"]]["prompt_tokens"]):
            return True
    return False


@pytest.mark.parametrize(("sim_flags", "run_flags"), DISAGREEING)
def test_a_history_unlike_the_answer_is_no_prompt_length_mismatch(start_sim, tmp_path, sim_flags, run_flags):
    sim = start_sim("--instant", *sim_flags)
    results = run_json(sim, tmp_path, *TURNS, *run_flags)
    rows, truth = turns_of(sim, results)
    assert {r["turn"] for r in rows} == {1, 2, 3} and all(r["status"] == "ok" for r in rows)
    assert old_guess_missed(rows, truth)  # the history really is not the answer as generated
    for row in rows:
        assert row["prompt_tokens"] == truth[row["request_id"]]["prompt_tokens"]
        assert row["unavailable_codes"].get("prefill_tps") != unavailable.PROMPT_LENGTH_MISSED, row["unavailable"]
        # a rate, or one withheld for another reason (a busy machine's): never for its length
        assert row["metrics"]["prefill_tps"] is not None or withheld_by_others(results, row), row["unavailable"]
    assert "prompt_length_mismatch" not in warning_codes(results)


def withheld_by_others(results: dict, row: dict) -> bool:
    """Whether the row's prefill t/s was withheld for something else than its length: its own
    reason (its code, not prompt_length_missed: asserted before) or another finding's, case-wide
    (a busy machine's sse_buffering withholds TTFT and so prefill t/s)."""
    others = {m for w in results["warnings"] if w["code"] != "prompt_length_mismatch" for m in w.get("withheld") or []}
    return "prefill_tps" in row["unavailable_codes"] or "prefill_tps" in others


def test_a_history_the_server_cut_is_still_fewer(start_sim, tmp_path):
    # The sim keeps the last 1,024 tokens (Ollama's num_ctx): the 4th turn's ~1,320 are cut.
    sim = start_sim("--instant", "--preset", "truncating")
    results = run_json(sim, tmp_path, "--turns", "4", "-c", "2", "--pp", "256", "--tg", "64", "--warmup", "0")
    rows, truth = turns_of(sim, results)
    cut = {
        r["request_id"]
        for r in rows
        if truth[r["request_id"]]["prompt_tokens_sent"] > truth[r["request_id"]]["prompt_tokens"]
    }
    assert cut and len(cut) < len(rows)
    for row in rows:
        missed = row["unavailable_codes"].get("prefill_tps") == unavailable.PROMPT_LENGTH_MISSED
        assert missed == (row["request_id"] in cut), row["request_id"]
        if missed:  # named against the window its history could make, not a length "sent"
            low, high = (
                row["target_prompt_tokens"] - row["prompt_slack"],
                row["target_prompt_tokens"] + row["prompt_slack"],
            )
            assert truth[row["request_id"]]["prompt_tokens"] < low
            assert f"fewer than its history could make ({low}-{high})" in row["unavailable"]["prefill_tps"]
    assert "prompt_length_mismatch" in warning_codes(results)
    (said,) = [w for w in results["warnings"] if w["code"] == "prompt_length_mismatch"]
    windows = {
        f"{r['target_prompt_tokens'] - r['prompt_slack']}-{r['target_prompt_tokens'] + r['prompt_slack']}"
        for r in rows
        if r["request_id"] in cut
    }
    assert any(f"fewer than the {w} its conversation's history could make" in said["message"] for w in windows)


def test_a_filler_is_one_token_generated_and_several_resent():
    texts, broken = prose.texts("fillers", 40, seed=7)
    assert len(texts) == 40 and broken == 40 and all(t.startswith("<filler_") for t in texts)
    assert vocab.count("".join(texts)) >= 5 * len(texts)  # `<` `filler` `_` digits `>` as text
