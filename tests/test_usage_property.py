"""The usage property: whatever `usage.completion_tokens` claims, benchy counts what streamed.

A simulator whose streamed text and its own /tokenize agree is run with usage scaled by any
factor, inside the 0.6-1.67 band that re-tokenizing alone cannot judge too, with one token an
event, four, or a stream interval of 20; and again without /tokenize. Judged by the simulator's
truth log: wherever the claim is off the truth by more than two exact counts of the same tokens
may differ (evidence.EVENT_SLACK_*), the run says `usage_mismatch` and e2e and decode rest on the
stream's count. The witnesses are the server's /tokenize of the text, the events, and the
max_tokens of a request that ended by length; none is fitted on usage.

Answers that end by `stop` have no max_tokens witness: there the server's /tokenize and benchy's
count of the text, scaled on the tokens the calibration answer was known to make, are two
witnesses, and usage off both beyond their own spread is flagged, inside that band too; without
/tokenize, that count alone flags usage beyond any ratio of two tokenizers (twice, or half).
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


# Answers that end by `stop` (the simulator disregards ignore_eos) before the run's max_tokens,
# while the calibration's 64-token answer still ends by length, as on a server that honours it.
NATURAL = ("--ignore-ignore-eos", "--natural-min", "64", "--natural-max", str(TG - 8))


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


def must_flag(count: dict, claimed: int, made: int) -> bool:
    """Whether the witnesses this request had tell `claimed` from `made`: the server's /tokenize
    of the text and benchy's count of it (scaled on tokens the calibration answer was known to
    make) within their own spread of each other; without /tokenize, one count of the text
    beyond any ratio two tokenizers' counts of it may have (evidence.RETOKENIZED_MIN_SHARE)."""
    told, local = count["server_tokenize"], count["local"]
    if told is not None and local is not None and evidence.agree(told, local):
        spread = max(abs(told - local), evidence.EVENT_SLACK_TOKENS, evidence.EVENT_SLACK_SHARE * max(told, claimed))
        return abs(claimed - told) > spread and abs(claimed - local) > spread
    share = evidence.RETOKENIZED_MIN_SHARE
    beyond = made < share * claimed or made * share > claimed
    return local is not None and beyond and abs(claimed - made) > evidence.USAGE_ABS_TOLERANCE


def judge_natural(results: dict, truth: dict[str, dict]) -> None:
    """The property for answers that ended by `stop`, request by request against the truth
    log: a claim off the truth that the request's witnesses can tell apart is flagged and the
    figures count the stream; a claim on the truth is never flagged; one in between may be
    either, but a flag always counts the stream."""
    case = only_case(results)
    must = flagged = False
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        made, claimed = t["completion_tokens"], t["usage_completion_tokens"]
        assert t["finish_reason"] == "stop" and count["usage"] == claimed
        assert req["local_scale_generated"] is True  # the calibration answer ended by length
        if off(claimed, made) and must_flag(count, claimed, made):
            must = True
            assert count["mismatch"], count
        if count["mismatch"]:
            flagged = True
            assert not off(count["tokens"], made) and count["source"] != evidence.USAGE, count
            assert evidence.USAGE in count["disagreed"]
            assert req["metrics"]["e2e_tps"] == pytest.approx(count["tokens"] / req["metrics"]["e2e_s"])
        if not off(claimed, made):
            assert not count["mismatch"] and not off(count["tokens"], made), count
    codes = warning_codes(results)
    assert ("usage_mismatch" in codes) == flagged and (flagged or not must)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(factor=FACTORS, events=st.sampled_from(EVENT_SHAPES))
@example(factor=1.2, events=EVENT_SHAPES[0])
@example(factor=1.3, events=EVENT_SHAPES[1])
@example(factor=0.8, events=EVENT_SHAPES[2])
@example(factor=1.0, events=EVENT_SHAPES[1])
def test_usage_of_natural_stops_against_its_own_tokenize(factor, events):
    """Answers that end by `stop`: no max_tokens witness, and inside the band re-tokenizing
    alone cannot judge (0.6-1.67), /tokenize and a local count scaled on generated tokens
    agreeing with each other still overrule usage beyond their own spread."""
    results, truth = run_claiming(factor, *NATURAL, *events)
    judge_natural(results, truth)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(factor=FACTORS, events=st.sampled_from(EVENT_SHAPES))
@example(factor=2.0, events=EVENT_SHAPES[1])
@example(factor=0.5, events=EVENT_SHAPES[2])
@example(factor=1.0, events=EVENT_SHAPES[1])
@example(factor=2.0, events=EVENT_SHAPES[0])
def test_usage_of_natural_stops_without_tokenize(factor, events):
    """No /tokenize, natural stops: several tokens an event leave the events only a floor, and
    the witness left is the streamed text counted locally, its scale fitted on the tokens the
    calibration answer was known to make (its max_tokens), never on usage; one token an event
    and that count are two."""
    results, truth = run_claiming(factor, "--no-tokenize", *NATURAL, *events)
    judge_natural(results, truth)


HEALTHY_MULTI_TOKEN = [
    ("--tokens-per-event", "8"),
    ("--preset", "stream-interval-20"),
    ("--preset", "spec-vllm"),
    ("--preset", "gpt-oss-harmony", "--tokens-per-event", "4"),
    ("--preset", "think-inline", "--tokens-per-event", "3"),
]


# (how answers end, sim flags of that and of /tokenize)
ENDINGS = [("length", ("--no-tokenize",)), ("stop", ("--no-tokenize", *NATURAL)), ("stop, tokenize", NATURAL)]


@pytest.mark.parametrize("ending", ENDINGS, ids=[e[0] for e in ENDINGS])
@pytest.mark.parametrize("shape", HEALTHY_MULTI_TOKEN, ids=lambda f: " ".join(f))
def test_honest_usage_on_multi_token_events_stays_clean(shape, ending):
    """The false-alarm side: an honest usage, several tokens an event, with and without
    /tokenize. The local count scaled on generated tokens is a witness now, beside the
    server's /tokenize; together or alone they must not overrule an honest claim."""
    results, truth = run_claiming(1.0, *ending[1], *shape)
    assert "usage_mismatch" not in warning_codes(results)
    for req in measured(only_case(results)):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["source"] == evidence.USAGE and not count["mismatch"], count
        assert count["tokens"] == t["usage_completion_tokens"]
