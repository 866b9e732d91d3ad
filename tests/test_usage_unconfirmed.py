"""Issue 52, item 6: usage that over-claims by less than two tokenizers may differ (1.67x), on a
server without /tokenize at several tokens an event, where the answer ends at its own end of
sequence (so max_tokens is no witness). The witness that closes it: usage's own error on
calibration's answer of known length (it ended by length), with the local count scaled on those
known tokens. Where that is not known, the output says usage stood alone, not that benchy's
tokenizer is not the model's. Judged against the simulator's truth log (what it generated, and
what its usage claimed)."""

from __future__ import annotations

import dataclasses
import json

from benchy.measure import reading
from benchy.records import CONTENT
from tests.conftest import bare_row, run_benchy_here, warning_codes
from tests.test_checks import measured, truth_of

SERVER = ("--tokens-per-event", "4", "--no-tokenize", "--ignore-ignore-eos", "--decode-tps", "400")


def _run(sim, out) -> dict:
    # 16 answers: the sim's natural lengths (64–512) stop before 256 about 43% of the time, so
    # at 6 runs none stopped once in ~30 (a CI run saw it); at 16, once in ~8,000
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--no-report", "--no-server-metrics", "--output", str(out),
        "--pp", "128", "--tg", "256", "--runs", "16",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads((out / "results.json").read_text())


def test_usage_over_claiming_within_a_tokenizers_ratio_is_caught_by_its_own_error_at_a_known_length(
    start_sim, tmp_path
):
    sim = start_sim("--usage-scale", "1.5", *SERVER)
    results = _run(sim, tmp_path / "out")
    # calibration's answer ended by length at 64 tokens, and usage claimed 96 of them: usage is
    # off by 1.5x where the count is known; the local count is scaled on those known tokens
    calibration = results["setup"]["calibration"]
    assert calibration["output_method"] == "max_tokens" and calibration["output_usage"] == 96
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    stopped = [r for r in measured(case) if truth[r["request_id"]]["finish_reason"] == "stop"]
    assert stopped  # the answers that ended on their own: max_tokens is no witness on them
    for row in stopped:
        t, count = truth[row["request_id"]], row["token_count"]
        assert t["usage_completion_tokens"] == round(1.5 * t["completion_tokens"])  # the truth: 1.5x
        assert count["source"] == "local" and "usage at a known length" in count["backed_by"]
        assert abs(count["tokens"] - t["completion_tokens"]) <= 2  # what the server generated
    said = next(w for w in results["warnings"] if w["code"] == "usage_mismatch")
    assert said["details"]["requests"] == len(measured(case))  # the length-ended ones and these
    assert "usage_unconfirmed" not in warning_codes(results)


def _record(usage: int, usage_at_known: float | None):
    """20 events of 'qorvantis', 3 o200k tokens each (60), scaled 1.0 on generated tokens."""
    words = ["qorvantis"] * 20
    return dataclasses.replace(
        bare_row(),
        token_event_text=" ".join(words),
        token_event_chars=[len(words[0])] + [len(w) + 1 for w in words[1:]],
        token_event_s=[0.1 + 0.01 * i for i in range(20)],
        token_event_kinds=CONTENT * 20,
        completion_tokens=usage,
        finish_reason="stop",
        target_output_tokens=1000,
        local_token_scale=1.0,
        local_scale_generated=True,
        usage_at_known=usage_at_known,
    )


def test_usage_alone_is_said_to_stand_alone_not_blamed_on_the_tokenizer():
    alone = reading.read(_record(90, None)).count  # 1.5x the text's 60: within two tokenizers' ratio
    assert alone.tokens == 90 and alone.source == "usage" and not alone.backed_by
    assert alone.local_mismatch.startswith("usage is the only witness") and "1.48x apart" in alone.local_mismatch
    honest = reading.read(_record(90, 1.0)).count  # usage was right where the count was known
    assert honest.source == "usage" and honest.local_mismatch.startswith("usage is the only witness")
    caught = reading.read(_record(90, 1.5)).count  # usage said 1.5x a known count: two witnesses
    assert caught.source == "local" and caught.usage == 90 and round(caught.tokens) == 61
    assert caught.backed_by == ("local", "usage at a known length") and caught.disagreed == ("usage",)


def test_honest_usage_on_the_same_server_is_not_doubted(start_sim, tmp_path):
    sim = start_sim(*SERVER)
    results = _run(sim, tmp_path / "out")
    assert "usage_unconfirmed" not in warning_codes(results)
