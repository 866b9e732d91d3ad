"""Properties of benchy.measure.evidence: counting, arrivals, the buffering verdict and think splitting."""

from __future__ import annotations

import bisect
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from benchy.measure import delivery, evidence, think, tokenizer
from benchy.records import CONTENT, REASONING

WORDS = [" the", " of", " and", " to", " in", " is", " was", " for"]


def words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def group(texts: list[str], sizes: list[int]) -> list[str]:
    out, pos = [], 0
    for k in sizes:
        out.append("".join(texts[pos : pos + k]))
        pos += k
    return out


# ---------------------------------------------------------------- counting


@settings(deadline=None)  # the first call loads the vocabulary
@given(st.lists(st.integers(1, 8), min_size=1, max_size=60), st.integers(0, 1000))
def test_local_event_tokens_of_one_token_words_are_exact(sizes, seed):
    texts = group(words(sum(sizes), seed), sizes)
    assert evidence.local_event_tokens(texts) == sizes


@settings(deadline=None)
@given(st.text(min_size=1, max_size=200), st.lists(st.integers(1, 30), min_size=1, max_size=20))
def test_local_event_tokens_cover_the_text_and_never_drop_an_event(text, cuts):
    chars, pos = [], 0
    for c in cuts:
        if pos >= len(text):
            break
        chars.append(min(c, len(text) - pos))
        pos += chars[-1]
    chars[-1] += len(text) - pos
    texts = evidence.event_texts(text, chars)
    assert "".join(texts) == text
    counts = evidence.local_event_tokens(texts)
    assert len(counts) == len(texts) and min(counts) >= 1
    assert sum(counts) >= tokenizer.count(text)
    assert sum(counts) <= tokenizer.count(text) + len(texts)


@settings(deadline=None)
@given(st.lists(st.sampled_from([" the", " w", "<think>", "</think>", "é", "ü ", "\n", "abc", "12"]), max_size=40))
def test_a_one_event_count_is_the_one_of_the_same_text_among_several_events(parts):
    # One event takes a shortcut without offsets; the text's tokens are the same ones either way
    # (a second, empty event holds none of them and counts 1).
    text = "".join(parts)
    assume(text)
    (one,) = evidence.local_tokens_of(text, [len(text)])
    first, empty = evidence.local_tokens_of(text, [len(text), 0])
    assert empty == 1 and one == first


@given(st.integers(1, 500), st.floats(0.25, 4.0), st.integers(2, 8))
def test_the_local_count_alone_never_overrules_usage(usage, local_ratio, per_event):
    # Several tokens an event and no server timings: the local count is the only other
    # witness, and an estimate (no real server's tokenizer is o200k).
    events, local = max(1, usage // per_event), usage * local_ratio
    count = evidence.token_count(usage, local, events)
    # Up to HIDDEN_TOKENS_MAX tokens made and not streamed (end of sequence, reasoning markers)
    # explain events a few below usage: then the events are no witness against it.
    hidden = 0 < usage - events <= evidence.HIDDEN_TOKENS_MAX
    if evidence.agree(events, local) and local <= events * 1.2 and not evidence.agree(usage, local) and not hidden:
        assert count.source == evidence.EVENTS and count.mismatch  # two witnesses: one token an event
        return
    assert count.source == evidence.USAGE and count.tokens == usage and count.mismatch is None
    if not evidence.agree(usage, local):
        assert count.local_mismatch and evidence.LOCAL in count.disagreed


def test_h200_usage_backed_by_predicted_n_beats_the_local_count():
    # The H200 llama-server (random-weight gpt-oss-20b): one token made no event, the local
    # tokenizer reads the noise as 393 tokens; the server's own timings say 128.
    count = evidence.token_count(128, 393.0, 127, predicted_n=128)
    assert (count.tokens, count.source, count.mismatch) == (128, evidence.USAGE, None)
    assert {evidence.PREDICTED_N, evidence.EVENTS} <= set(count.backed_by)
    assert count.disagreed == (evidence.LOCAL,) and "does not match" in count.local_mismatch


def test_speculative_bursts_in_a_foreign_vocabulary_keep_usage():
    count = evidence.token_count(128, 181.0, 31)  # 2-7 tokens an event, words not o200k's
    assert (count.tokens, count.source, count.mismatch) == (128, evidence.USAGE, None)
    assert count.local_mismatch


def test_usage_mismatch_needs_two_witnesses_agreeing_against_usage():
    doubled = evidence.token_count(200, 104.0, 100)  # one token an event, and the text agrees
    assert (doubled.tokens, doubled.source) == (100, evidence.EVENTS) and doubled.mismatch
    assert set(doubled.backed_by) == {evidence.EVENTS, evidence.LOCAL}
    timed = evidence.token_count(256, 130.0, 40, predicted_n=128)  # the server's timings and the text
    assert (timed.tokens, timed.source) == (128, evidence.PREDICTED_N) and "agree on 128" in timed.mismatch
    alone = evidence.token_count(256, 500.0, 40, predicted_n=128)  # predicted_n alone: usage stands
    assert (alone.tokens, alone.source, alone.mismatch) == (256, evidence.USAGE, None)
    assert evidence.PREDICTED_N in alone.disagreed


def test_tokenize_and_a_local_count_scaled_on_generated_tokens_are_two_witnesses():
    # Several tokens an event, an answer that ended by stop: usage 1.3x, inside the band
    # re-tokenizing alone cannot judge. A local count scaled on /tokenize echoes it (one
    # witness); one scaled on tokens the server was known to make is a second.
    echo = evidence.token_count(130, 100.0, 25, server_tokenize=100)
    assert (echo.tokens, echo.source, echo.mismatch) == (130, evidence.USAGE, None)
    two = evidence.token_count(130, 101.0, 25, server_tokenize=100, local_generated=True)
    assert (two.tokens, two.source) == (100, evidence.SERVER_TOKENIZE) and two.mismatch
    assert set(two.backed_by) == {evidence.SERVER_TOKENIZE, evidence.LOCAL} and two.disagreed == (evidence.USAGE,)
    # Within their own spread of each other (100 and 108), usage stands.
    near = evidence.token_count(110, 108.0, 25, server_tokenize=100, local_generated=True)
    assert (near.tokens, near.source, near.mismatch) == (110, evidence.USAGE, None)


def test_witnesses_that_disagree_among_themselves_leave_the_band_standing():
    # A random-weight model: 128 tokens made, /tokenize of its text says 90, the local count
    # scaled on generated tokens about 128. The two disagree: re-tokenizing moved the count,
    # and honest usage stands.
    count = evidence.token_count(128, 126.0, 32, server_tokenize=90, local_generated=True)
    assert (count.tokens, count.source, count.mismatch) == (128, evidence.USAGE, None)


def test_unstreamed_tokens_explain_usage_only_where_reasoning_came_apart():
    # 50 one-token events, /tokenize 50, usage 65: a reasoning parser's markers could be the
    # 15 (HIDDEN_TOKENS_MAX); with no reasoning only the end of sequence is unstreamed.
    parsed = evidence.token_count(65, 50.0, 50, server_tokenize=50, hidden_max=evidence.HIDDEN_TOKENS_MAX)
    assert (parsed.tokens, parsed.source, parsed.mismatch) == (65, evidence.USAGE, None)
    plain = evidence.token_count(65, 50.0, 50, server_tokenize=50, hidden_max=evidence.EVENT_SLACK_TOKENS)
    assert plain.tokens == 50 and plain.mismatch and evidence.USAGE in plain.disagreed
    eos = evidence.token_count(51, 50.0, 50, server_tokenize=50, hidden_max=evidence.EVENT_SLACK_TOKENS)
    assert (eos.tokens, eos.source, eos.mismatch) == (51, evidence.USAGE, None)


def test_without_tokenize_a_local_count_scaled_on_generated_tokens_overrules_usage_beyond_the_band():
    doubled = evidence.token_count(200, 100.0, 25, local_generated=True)
    assert (doubled.tokens, doubled.source) == (100, evidence.LOCAL) and doubled.mismatch
    assert "beyond any ratio of two tokenizers" in doubled.mismatch
    inside = evidence.token_count(130, 100.0, 25, local_generated=True)  # a tokenizer ratio may do that
    assert (inside.tokens, inside.source, inside.mismatch) == (130, evidence.USAGE, None)
    fitted = evidence.token_count(200, 100.0, 25)  # scaled on /tokenize or prompts: an estimate alone
    assert (fitted.tokens, fitted.source, fitted.mismatch) == (200, evidence.USAGE, None)
    # usage a quarter of the text, equal to the events: one token an event is not what happened
    quarter = evidence.token_count(26, 104.0, 26, local_generated=True)
    assert (quarter.tokens, quarter.source) == (104, evidence.LOCAL) and quarter.mismatch


def test_without_usage_the_servers_own_counts_come_before_the_estimate():
    timed = evidence.token_count(None, 300.0, 20, predicted_n=96)
    assert (timed.tokens, timed.source, timed.estimate) == (96, evidence.PREDICTED_N, False)
    chunked = evidence.token_count(None, 300.0, 20, per_chunk=90)
    assert (chunked.tokens, chunked.source) == (90, evidence.PER_CHUNK)


def test_token_count_one_token_per_event_confirms_usage_without_the_local_count():
    # A random-weight model's text counts oddly in any other tokenizer; one event per token
    # is evidence enough.
    count = evidence.token_count(200, 90.0, 200)
    assert (count.source, count.tokens, count.mismatch) == ("usage", 200, None)


def test_token_count_usage_below_the_event_count_is_impossible():
    count = evidence.token_count(50, None, 100)
    assert count.source == evidence.EVENT_FLOOR and count.tokens == 100 and "100 events" in count.mismatch


def test_token_count_without_usage_is_an_estimate_never_below_the_events():
    many = evidence.token_count(None, 80.4, 10)
    assert many.tokens == 80 and many.source == evidence.LOCAL and many.estimate
    low = evidence.token_count(None, 30.0, 100)  # never below the events
    assert low.tokens == 100 and low.source == evidence.EVENTS and low.mismatch is None


def test_one_token_per_event_without_usage_is_confirmed_by_the_text():
    count = evidence.token_count(None, 96.0, 100)  # a foreign tokenizer: the text counts a little short
    assert count.tokens == 100 and count.source == evidence.EVENTS and not count.estimate


def test_per_chunk_usage_gives_the_servers_own_event_counts():
    texts = ["a", "bc", "d"]
    got = delivery.event_tokens(texts, 6, cumulative=[1, 4, 6])
    assert got.counts == [1, 3, 2] and got.source == "per-chunk usage"
    other = delivery.event_tokens(texts, 7, cumulative=[1, 4, 6])  # does not add up: ignored
    assert other.source == "local tokenizer" and sum(other.counts) == pytest.approx(7)


# ---------------------------------------------------------------- arrivals and buffering


def live(sizes: list[int], ttft: float, step: float, jitter: float = 0.0, seed: int = 0):
    rng = random.Random(seed)
    times = [ttft + i * step + rng.uniform(0, jitter) for i in range(len(sizes))]
    return sorted(times), [float(k) for k in sizes]


def spec_steps(n: int, draft: int, seed: int) -> list[int]:
    rng, steps = random.Random(seed), [1]
    while sum(steps) < n:
        k = 1
        while k <= draft and rng.random() < 0.8:
            k += 1
        steps.append(min(k, n - sum(steps)))
    return steps


@settings(max_examples=60)
@given(st.integers(20, 400), st.floats(0.001, 0.05), st.floats(0.01, 2.0), st.integers(0, 10**6))
def test_one_token_per_event_live_streams_are_never_buffered(n, step, ttft, seed):
    times, tokens = live([1] * n, ttft, step, jitter=step * 0.3, seed=seed)
    arr = delivery.arrivals(times, tokens)
    assert not delivery.buffering(arr, ttft).buffered
    assert delivery.itl_per_token(arr) == pytest.approx(step, rel=0.35)


@settings(max_examples=60)
@given(st.integers(20, 400), st.integers(2, 8), st.floats(0.003, 0.05), st.integers(0, 10**6))
def test_vllm_speculation_is_not_buffering_and_itl_per_token_is_gap_over_tokens(n, draft, step, seed):
    sizes = spec_steps(n, draft, seed)
    times, tokens = live(sizes, 0.1, step)
    arr = delivery.arrivals(times, tokens)
    verdict = delivery.buffering(arr, 0.1)
    assert not verdict.buffered, verdict.reason
    assert delivery.itl_per_token(arr) == pytest.approx(step * (len(sizes) - 1) / sum(sizes[1:]))
    assert delivery.itl_per_arrival(arr) == pytest.approx(step)


@settings(max_examples=60)
@given(st.integers(20, 400), st.integers(2, 16), st.floats(0.003, 0.05), st.integers(0, 10**6))
def test_llamacpp_speculation_bursts_are_not_buffering_and_itl_does_not_collapse(n, draft, step, seed):
    sizes = spec_steps(n, draft, seed)
    times, tokens = [], []
    for i, k in enumerate(sizes):  # each token its own event, a step's events 30 µs apart
        times += [0.1 + i * step + j * 30e-6 for j in range(k)]
        tokens += [1.0] * k
    arr = delivery.arrivals(times, tokens)
    assert [a.tokens for a in arr] == sizes
    assert not delivery.buffering(arr, 0.1).buffered
    assert delivery.itl_per_token(arr) >= 0.999 * step / (draft + 1)  # never the 30 µs within a burst
    last_step = 0.1 + (len(sizes) - 1) * step  # an arrival is timed by its first event
    assert delivery.decode_rate(arr) == pytest.approx((n - 1) / (last_step - 0.1), rel=0.01)


@settings(max_examples=60)
@given(st.integers(60, 400), st.integers(8, 40), st.floats(0.002, 0.03), st.floats(0.01, 0.5))
def test_a_proxy_buffer_is_buffering(n, burst, step, ttft):
    # one token per event, made every `step`, delivered `burst` at a time
    made = [ttft + i * step for i in range(n)]
    times = [made[min(n - 1, (i // burst + 1) * burst - 1)] + (i % burst) * 2e-6 for i in range(n)]
    arr = delivery.arrivals(times, [1.0] * n)
    verdict = delivery.buffering(arr, times[0])
    assert verdict.hidden_s == pytest.approx(times[0] - ttft, rel=0.3)
    # buffered, unless the first token's delay is too small a share of TTFT to matter
    assert verdict.buffered or verdict.hidden_s < delivery.FIRST_ARRIVAL_HIDDEN_SHARE * times[0], verdict.reason


@settings(max_examples=60)
@given(st.integers(60, 600), st.integers(2, 64), st.floats(0.001, 0.03), st.floats(0.01, 1.0))
def test_a_stream_interval_is_not_buffering_at_any_interval(n, interval, step, ttft):
    # vLLM --stream-interval / TensorRT-LLM stream_interval: the first token alone when prefill
    # ends, then `interval` tokens an event, written when the last of them is made. With a single
    # event after the first there is no cadence to tell it from a buffer (the field report's 29
    # tokens in 2 events): test_buffered_stream_keeps_e2e_and_drops_stream_timings holds that.
    sizes = [1] + [min(interval, n - start) for start in range(1, n, interval)]
    assume(len(sizes) - 1 >= delivery.CADENCE_MIN_ARRIVALS)
    made = [ttft + i * step for i in range(n)]
    ends = [sum(sizes[: i + 1]) - 1 for i in range(len(sizes))]
    arr = delivery.arrivals([made[e] for e in ends], [float(k) for k in sizes])
    verdict = delivery.buffering(arr, ttft)
    assert not verdict.buffered, verdict.reason
    assert delivery.decode_rate(arr) == pytest.approx(1 / step, rel=1e-6)  # the model's own rate


@settings(max_examples=60)
@given(st.integers(18, 40), st.integers(2, 5), st.integers(3, 6), st.floats(0.002, 0.02))
def test_a_proxy_buffer_over_a_stream_interval_is_buffering(interval, per_read, reads, step):
    # The same events, released `per_read` at a time by a buffer: several events an arrival.
    n = 1 + interval * per_read * reads
    sizes = [1] + [interval] * (per_read * reads)
    made = [0.1 + i * step for i in range(n)]
    ends = [sum(sizes[: i + 1]) - 1 for i in range(len(sizes))]
    released = [
        made[ends[min(len(ends) - 1, (i // per_read + 1) * per_read - 1)]] + (i % per_read) * 2e-6
        for i in range(len(ends))
    ]
    verdict = delivery.buffering(delivery.arrivals(released, [float(k) for k in sizes]), released[0])
    assert verdict.buffered, verdict.reason


def test_bursts_of_one_event_at_an_uneven_cadence_are_still_buffering():
    # 20 tokens an event, but the gaps do not follow the tokens: a server releasing what it held.
    times, tokens = [0.1], [1.0]
    for gap in [0.01, 0.4, 0.01, 0.5, 0.02, 0.6, 0.01, 0.45]:
        times.append(times[-1] + gap)
        tokens.append(20.0)
    assert not delivery.server_interval(delivery.arrivals(times, tokens))
    assert delivery.buffering(delivery.arrivals(times, tokens), 0.1).buffered


# Gaps (ms) between the events of real vLLM 0.32 CPU streams, `--stream-interval 20`, 200 tokens,
# on a 2-core machine kept busy: the first token alone, then 20 tokens an event at an uneven pace.
VLLM_INTERVAL_GAPS_MS = (
    [353.9, 287.5, 719.6, 212.6, 906.0, 253.7, 1744.3, 284.0, 720.3],
    [658.9, 464.9, 274.9, 205.4, 222.5, 95.2, 96.5, 423.3, 151.0, 282.1],
    [412.5, 233.2, 843.2, 200.2, 156.9, 110.1, 106.4, 102.1, 127.0, 67.0],
    [204.0, 83.0, 98.3, 88.1, 88.1, 88.9, 80.5, 467.9, 233.9, 393.6],
)


@pytest.mark.parametrize("gaps_ms", VLLM_INTERVAL_GAPS_MS)
def test_a_slow_uneven_stream_interval_is_not_buffering(gaps_ms):
    # A slow event holds nothing back: only an event sooner than its tokens take is evidence.
    times, tokens = [0.02], [1.0]
    for gap in gaps_ms:
        times.append(times[-1] + gap / 1000)
        tokens.append(20.0)
    arr = delivery.arrivals(times, tokens)
    assert delivery.server_interval(arr)
    assert not delivery.buffering(arr, 0.02).buffered


def test_many_tokens_in_the_first_event_is_buffering_but_two_or_three_are_not():
    for first, expected in ((3, False), (8, True), (16, True)):
        sizes = [first] * 10
        times, tokens = live(sizes, 0.05, 0.005 * first)
        verdict = delivery.buffering(delivery.arrivals(times, tokens), 0.05)
        assert verdict.buffered == expected, (first, verdict.reason)


def test_a_lumpy_first_event_on_a_very_fast_stream_hides_nothing_worth_a_warning():
    times, tokens = live([6] + [1] * 100, 0.2, 0.0002)  # 6 tokens: 1 ms hidden of 200 ms
    assert not delivery.buffering(delivery.arrivals(times, tokens), 0.2).buffered


# ---------------------------------------------------------------- inline reasoning


def test_split_think_marks_the_block_and_finds_the_first_answer_event():
    texts = ["<think>", " so", " hm", "</think>", "\n\n", " The", " end"]
    split = think.split_think(texts, CONTENT * 7)
    assert split.kinds == REASONING * 4 + CONTENT * 3 and split.closed and split.think_events == 4
    merged = ["<think> so", " hm</think> The", " end"]
    assert think.split_think(merged, CONTENT * 3).kinds == REASONING + CONTENT * 2


def test_split_think_unclosed_is_all_reasoning_and_plain_content_is_untouched():
    unclosed = think.split_think(["<think>", " a", " b"], CONTENT * 3)
    assert unclosed.kinds == REASONING * 3 and not unclosed.closed and unclosed.opened
    plain = think.split_think([" The", " <think>", " x"], CONTENT * 3)
    assert plain.kinds == CONTENT * 3 and not plain.opened
    parser = think.split_think([" so", " The"], REASONING + CONTENT)  # a reasoning parser's split
    assert parser.kinds == REASONING + CONTENT


@given(st.lists(st.sampled_from(WORDS + ["<think>", "</think>", "\n"]), max_size=40))
def test_split_think_only_ever_turns_content_into_reasoning(texts):
    kinds = CONTENT * len(texts)
    split = think.split_think(texts, kinds)
    assert len(split.kinds) == len(kinds)
    first_content = split.kinds.find(CONTENT)
    assert first_content < 0 or REASONING not in split.kinds[first_content:]


def test_think_tags_count_one_token_each_as_in_the_vocabularies_that_emit_them():
    assert evidence.local_event_tokens(["<think>", " so", "</think>", " The"]) == [1, 1, 1, 1]


def test_an_instant_server_read_in_a_few_large_chunks_is_not_buffering():
    times = [0.01] * 100 + [0.0105] * 100 + [0.011] * 56  # 256 tokens within 1 ms
    assert not delivery.buffering(delivery.arrivals(times, [1.0] * 256), 0.01).buffered


@pytest.mark.parametrize("events", [1, 64])
def test_the_whole_answer_in_one_arrival_is_buffered(events):
    # One event at the end, or 64 one-token events in one read (a compressing proxy): the
    # first token waited for all the others, and nothing is left to time.
    tokens = [64.0 / events] * events
    verdict = delivery.buffering(delivery.arrivals([0.371] * events, tokens), 0.371)
    assert verdict.buffered and "at once" in verdict.reason
    assert not delivery.buffering(delivery.arrivals([0.05], [1.0]), 0.05).buffered  # one token: nothing hidden


def test_the_servers_tokenization_backs_usage_or_outvotes_it_with_another_witness():
    # Speculative events (31 for 128 tokens): the server's /tokenize of the text backs usage.
    backed = evidence.token_count(128, 181.0, 31, server_tokenize=128)
    assert backed.source == evidence.USAGE and evidence.SERVER_TOKENIZE in backed.backed_by
    # usage doubled: the server's tokenization and one token an event agree against it.
    doubled = evidence.token_count(200, 104.0, 100, server_tokenize=100)
    assert doubled.tokens == 100 and doubled.source == evidence.SERVER_TOKENIZE and doubled.mismatch
    # No usage: the server's tokenization is the count, not an estimate.
    missing = evidence.token_count(None, 300.0, 20, server_tokenize=96)
    assert missing.tokens == 96 and missing.source == evidence.SERVER_TOKENIZE and not missing.estimate


@given(st.integers(32, 2000), st.floats(0.05, 8.0), st.integers(1, 8))
def test_usage_the_streamed_text_cannot_explain_is_overruled_whatever_the_events(tokens, claim, per_event):
    """The server's /tokenize of the streamed text and the local count, agreeing against usage
    where re-tokenizing cannot explain the gap (the text's count under RETOKENIZED_MIN_SHARE of
    usage, or over usage ÷ it), overrule usage: the count is the text's."""
    usage = max(1, round(tokens * claim))
    events = max(1, tokens // per_event)
    share = evidence.RETOKENIZED_MIN_SHARE
    if usage < events or evidence.agree(tokens, usage) or share * usage <= tokens <= usage / share:
        return  # impossible usage (its own rule), or a gap re-tokenizing can explain
    count = evidence.token_count(usage, float(tokens), events, server_tokenize=tokens)
    assert count.tokens == tokens and count.mismatch and evidence.USAGE in count.disagreed


def test_the_servers_tokenization_and_the_local_count_are_one_witness_not_two():
    # A random-weight model's tokens merge when its text is tokenized again: /tokenize and the
    # local count (calibrated on /tokenize) both count that text, and agree against usage.
    # Counting the same text twice is no second witness: usage stands, both are noted.
    count = evidence.token_count(128, 90.0, 31, server_tokenize=90)
    assert count.tokens == 128 and count.source == evidence.USAGE and count.mismatch is None
    assert {evidence.SERVER_TOKENIZE, evidence.LOCAL} <= set(count.disagreed)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([" the", " w", "ing", " hello", ",", ".", " 12", "3", "\n", "  ", "ab"]),
        min_size=2,
        max_size=40,
    ),
    st.lists(st.booleans(), min_size=40, max_size=40),
    st.booleans(),
)
def test_each_events_count_is_the_tokens_that_start_in_it(words, cuts, one_token_each):
    """A reference by hand (each token's start looked up among the events' starts) against
    local_tokens_of, on ASCII text cut anywhere and cut at every token (the case it answers
    from one encode, with no offsets): the same counts, an event never below one."""
    text = "".join(words)
    ids = tokenizer.encode(text)
    if one_token_each:
        texts = [tokenizer.decode([i]) for i in ids]
    else:
        texts, start = [], 0
        for end in [k + 1 for k, cut in enumerate(cuts[: len(text) - 1]) if cut] + [len(text)]:
            texts.append(text[start:end])
            start = end
    assume(len(texts) >= 2 and "".join(texts) == text)
    starts = [sum(len(t) for t in texts[:k]) for k in range(len(texts))]
    reference = [0] * len(texts)
    for offset in evidence._token_offsets(text).tolist():
        reference[bisect.bisect_right(starts, offset) - 1] += 1
    reference = [max(1, n) for n in reference]
    assert evidence.local_tokens_of(text, [len(t) for t in texts]) == reference
    if one_token_each:
        assert reference == [1] * len(texts)
