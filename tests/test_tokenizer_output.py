"""Issue 52, item 5: `--tokenizer` counts the output too. With the model's own tokenizer given,
each answer's streamed text is counted in that vocabulary after its case (a late witness in
requests.jsonl), and that count is the local witness on usage: not benchy's o200k scaled by
calibration, which no real model's vocabulary is. Judged against the simulator's truth log (its
own count of every token it generated), on a vocabulary unlike o200k (`--vocab syllable`)."""

from __future__ import annotations

import dataclasses
import json

from benchy.measure import reading
from benchy.measure.evidence import LENGTHS_O200K, LENGTHS_TOKENIZER_FILE
from benchy.records import CONTENT, witness_line
from tests.conftest import bare_row, run_benchy_here, warning_codes
from tests.test_checks import measured, truth_of
from tests.test_lengths import syllable_tokenizer_json


def _run(sim, out, *flags: str) -> dict:
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--no-report", "--output", str(out), "--pp", "128",
        "--tg", "48", "--runs", "3", *flags,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def test_the_tokenizer_file_counts_every_answer_as_the_server_does(start_sim, tmp_path):
    file = syllable_tokenizer_json(tmp_path)
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--tokens-per-event", "3", "--decode-tps", "400")
    results = _run(sim, tmp_path / "with", "--tokenizer", file)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    for row in measured(case):
        count = row["token_count"]
        assert count["local_by"] == LENGTHS_TOKENIZER_FILE
        assert count["local"] == truth[row["request_id"]]["completion_tokens"]  # the server's own count, exactly
        assert "local" in count["backed_by"] and count["local_mismatch"] is None
    assert "local_tokenizer_mismatch" not in warning_codes(results)
    # the witness came on lines of their own, after the records (the bundle rebuilds with it)
    lines = (tmp_path / "with" / "requests.jsonl").read_text().splitlines()
    assert sum('"tokenizer_tokens"' in line and line.startswith('{"witness_of"') for line in lines) == len(
        measured(case)
    )


def test_without_a_tokenizer_file_the_local_count_is_benchys_estimate(start_sim, tmp_path):
    sim = start_sim("--vocab", "syllable", "--no-tokenize", "--tokens-per-event", "3", "--decode-tps", "400")
    results = _run(sim, tmp_path / "without")
    rows = measured(results["cases"][0])
    assert {r["token_count"]["local_by"] for r in rows} == {LENGTHS_O200K}


def _record(text: str, usage: int, tokenizer_tokens: int | None, scale: float) -> object:
    words = text.split(" ")
    return dataclasses.replace(
        bare_row(),
        token_event_text=" ".join(words),
        token_event_chars=[len(w) + (1 if i else 0) for i, w in enumerate(words)],
        token_event_s=[0.1 + 0.01 * i for i in range(len(words))],
        token_event_kinds=CONTENT * len(words),
        completion_tokens=usage,
        finish_reason="stop",
        target_output_tokens=4 * usage,
        local_token_scale=scale,
        local_scale_generated=True,
        tokenizer_tokens=tokenizer_tokens,
    )


def test_a_server_the_tokenizer_matches_is_not_noted_as_another_vocabulary():
    # An answer of 20 events, two tokens each by usage and by the model's vocabulary, that o200k
    # counts three a word (at the scale calibration found on another text: 1.5x usage): benchy's
    # tokenizer alone notes "not this model's"; the model's own backs usage.
    text = " ".join(["qorvantis"] * 20)
    o200k = reading.read(_record(text, 40, None, 1.0)).count
    assert o200k.local > 1.4 * 40 and o200k.local_mismatch is not None and o200k.tokens == 40
    mine = reading.read(_record(text, 40, 40, 1.0)).count
    assert mine.local == 40 and mine.local_mismatch is None and "local" in mine.backed_by
    # and the count it gives is kept beside the record's other late witnesses
    assert witness_line(_record(text, 40, 40, 1.0)) == {"witness_of": "r", "tokenizer_tokens": 40}
