"""Issue 52, item 6: usage that over-claims by less than two tokenizers may differ (1.67x), on a
server without /tokenize at several tokens an event, where the answer ends at its own end of
sequence (so max_tokens is no witness). No witness of the stream can overrule usage there; the
output must say that usage stood alone, not that benchy's tokenizer is not the model's. Judged
against the simulator's truth log (what it generated, and what its usage claimed)."""

from __future__ import annotations

import json
import re

from tests.conftest import run_benchy_here, warning_codes
from tests.test_checks import measured, truth_of

SERVER = ("--tokens-per-event", "4", "--no-tokenize", "--ignore-ignore-eos", "--decode-tps", "400")


def _run(sim, out) -> dict:
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--no-report", "--no-server-metrics", "--output", str(out),
        "--pp", "128", "--tg", "256", "--runs", "6",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads((out / "results.json").read_text())


def test_usage_over_claiming_within_a_tokenizers_ratio_is_said_to_stand_alone(start_sim, tmp_path):
    sim = start_sim("--usage-scale", "1.5", *SERVER)
    results = _run(sim, tmp_path / "out")
    # the local count is a witness of its own: scaled on an answer known to end at its max_tokens
    assert results["setup"]["calibration"]["output_method"] == "max_tokens"
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    # the truth: the answers that stopped on their own, their usage 1.5x what was generated
    stopped = [r for r in measured(case) if truth[r["request_id"]]["finish_reason"] == "stop"]
    assert stopped
    for row in stopped:
        t = truth[row["request_id"]]
        assert t["usage_completion_tokens"] == round(1.5 * t["completion_tokens"])
        assert row["token_count"]["local_mismatch"].startswith("usage is the only witness")
    said = next(w for w in results["warnings"] if w["code"] == "usage_unconfirmed")
    assert said["details"]["requests"] == len(stopped) and said["severity"] == "warning"
    ratio = float(re.search(r"([0-9.]+)x apart", said["message"]).group(1))
    assert abs(ratio - 1.5) < 0.1 and "rest on usage alone" in said["message"]  # the truth's over-claim
    assert "e2e_tps" in said["metrics"]
    # no word that the tokenizer is to blame for those
    notes = [w["message"] for w in results["warnings"] if w["code"] == "local_tokenizer_mismatch"]
    assert all(f"{len(stopped)} of" not in n for n in notes)


def test_honest_usage_on_the_same_server_is_not_doubted(start_sim, tmp_path):
    sim = start_sim(*SERVER)
    results = _run(sim, tmp_path / "out")
    assert "usage_unconfirmed" not in warning_codes(results)
