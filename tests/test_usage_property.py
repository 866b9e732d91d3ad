"""The usage property: whatever `usage.completion_tokens` claims, benchy counts what streamed.

A simulator whose streamed text and its own /tokenize agree is run with usage scaled by any
factor, inside the 0.6-1.67 band that re-tokenizing alone cannot judge too, with one token an
event, four, or a stream interval of 20; and again without /tokenize. Judged by the simulator's
truth log: wherever the claim is off the truth by more than two exact counts of the same tokens
may differ (evidence.EVENT_SLACK_*), the run says `usage_mismatch` and e2e and decode rest on the
stream's count. The witnesses are the server's /tokenize of the text, the events, and the
max_tokens of a request that ended by length; none is fitted on usage.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from benchy.measure import evidence
from benchy.sim.process import SimProcess
from tests.conftest import warning_codes
from tests.test_checks import measured, truth_of
from tests.test_cross_examined import FAST_PREFILL, bench, only_case

TG = 128
# One token an event, four, and a stream interval of 20 (the first token alone, then 20 an event).
EVENT_SHAPES = [("--tokens-per-event", "1"), ("--tokens-per-event", "4"), ("--stream-interval", "20")]
FACTORS = st.floats(min_value=0.25, max_value=3.0).map(lambda f: round(f, 2))


def run_claiming(factor: float, *flags: str) -> tuple[dict, dict[str, dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        sim_flags = ("--usage-scale", str(factor), "--decode-tps", "800", *FAST_PREFILL, *flags)
        with SimProcess(*sim_flags, truth_log=Path(tmp) / "truth.jsonl") as sim:
            results = bench(sim, tg=(TG,))
            return results, truth_of(sim, results)


def off(claimed: int, made: int) -> bool:
    """Further apart than two exact counts of the same tokens may be."""
    return abs(claimed - made) > max(evidence.EVENT_SLACK_TOKENS, evidence.EVENT_SLACK_SHARE * max(claimed, made))


def judge(results: dict, truth: dict[str, dict]) -> None:
    """The property, request by request against the truth log."""
    case = only_case(results)
    flagged = False
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        made, claimed = t["completion_tokens"], t["usage_completion_tokens"]
        assert count["usage"] == claimed  # benchy read what the server claimed
        if off(claimed, made):
            flagged = True
            assert count["tokens"] == made and count["source"] != evidence.USAGE, count
            assert evidence.USAGE in count["disagreed"] and count["mismatch"]
            assert req["metrics"]["e2e_tps"] == pytest.approx(made / req["metrics"]["e2e_s"])
            # The decode figure spreads the stream's count over the events, not usage's.
            assert req["metrics"]["tokens_per_event"] == pytest.approx(made / count["events"])
        else:
            assert not off(count["tokens"], made)
    assert ("usage_mismatch" in warning_codes(results)) == flagged


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(factor=FACTORS, events=st.sampled_from(EVENT_SHAPES))
@example(factor=1.3, events=EVENT_SHAPES[1])
@example(factor=0.7, events=EVENT_SHAPES[2])
@example(factor=1.05, events=EVENT_SHAPES[1])
def test_usage_against_a_stream_its_own_tokenize_agrees_with(factor, events):
    results, truth = run_claiming(factor, *events)
    judge(results, truth)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(factor=FACTORS, events=st.sampled_from(EVENT_SHAPES))
@example(factor=1.3, events=EVENT_SHAPES[0])
@example(factor=1.5, events=EVENT_SHAPES[1])
@example(factor=0.8, events=EVENT_SHAPES[0])
def test_usage_against_the_stream_without_tokenize(factor, events):
    """No /tokenize: the calibration's scale then comes from usage and is no witness; the events
    (one token each, or a floor) and the max_tokens a length finish reached are."""
    results, truth = run_claiming(factor, "--no-tokenize", *events)
    judge(results, truth)
