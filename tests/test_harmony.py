import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchy.client.harmony import (
    MARKERS,
    RESPONSE_END_STOPS,
    HarmonyStream,
    dangerous_stops,
    delta_kind,
    markers_missing,
    parse_response,
    render_prompt,
    render_response,
)
from benchy.measure import tokenizer

EXPECTED_PROMPT = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    "<|end|>"
    "<|start|>user<|message|>What is 2 + 2?<|end|>"
    "<|start|>assistant"
)

EXPECTED_PROMPT_WITH_DEVELOPER = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2024-01-02\n"
    "\n"
    "Reasoning: high\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    "<|end|>"
    "<|start|>developer<|message|># Instructions\n\nAlways respond in riddles<|end|>"
    "<|start|>user<|message|>What is 2 + 2?<|end|>"
    "<|start|>assistant"
)

# o200k_harmony ids, as in openai/harmony's docs/format.md token example.
CHANNEL_ID, MESSAGE_ID, END_ID, START_ID, RETURN_ID = 200005, 200008, 200007, 200006, 200002
ANALYSIS_ID, ASSISTANT_ID, FINAL_ID = 35644, 173781, 17196


def test_prompt_snapshot():
    assert render_prompt("What is 2 + 2?") == EXPECTED_PROMPT


def test_prompt_snapshot_with_developer_and_effort():
    rendered = render_prompt(
        "What is 2 + 2?", system_date="2024-01-02", reasoning_effort="high", developer="Always respond in riddles"
    )
    assert rendered == EXPECTED_PROMPT_WITH_DEVELOPER


def test_prompt_rejects_unknown_effort():
    with pytest.raises(ValueError):
        render_prompt("hi", reasoning_effort="none")


def test_prompt_markers_are_single_special_tokens():
    ids = tokenizer.encode(render_prompt("What is 2 + 2?"))
    specials = [i for i in ids if i >= 200000]
    assert specials == [START_ID, MESSAGE_ID, END_ID, START_ID, MESSAGE_ID, END_ID, START_ID]
    assert ids[-2:] == [START_ID, ASSISTANT_ID]


def test_response_tokens_match_harmony_docs():
    ids = tokenizer.encode(render_response("x", "y"))
    assert ids[:3] == [CHANNEL_ID, ANALYSIS_ID, MESSAGE_ID]
    assert ids[-7:-2] == [START_ID, ASSISTANT_ID, CHANNEL_ID, FINAL_ID, MESSAGE_ID]
    assert ids[-1] == RETURN_ID


def test_response_text():
    assert render_response("think", "Paris") == (
        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Paris<|return|>"
    )


# Content may hold marker fragments ("<|en", "|>") but never a whole marker.
_content = st.text(alphabet=st.sampled_from(list("ab <|>\nendstartmsg")) | st.characters(), max_size=60).filter(
    lambda s: not any(m in s for m in MARKERS)
)


def _feed_split(text: str, cuts: list[int]) -> tuple[HarmonyStream, list[tuple[str, str]]]:
    stream, pieces, prev = HarmonyStream(), [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        pieces += stream.feed(text[prev:cut])
        prev = cut
    pieces += stream.close()
    return stream, pieces


def _joined(pieces, channel):
    return "".join(text for ch, text in pieces if ch == channel)


@settings(max_examples=300, deadline=None)
@given(analysis=_content, final=_content, data=st.data())
def test_round_trip_any_split(analysis, final, data):
    text = render_response(analysis, final)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    stream, pieces = _feed_split(text, cuts)
    assert stream.chars["analysis"] == len(analysis)
    assert stream.chars["final"] == len(final)
    assert stream.chars["commentary"] == 0
    assert sum(stream.chars.values()) == len(text)
    assert _joined(pieces, "analysis") == analysis
    assert _joined(pieces, "final") == final
    assert "".join(t for _, t in pieces) == text
    assert stream.saw_markers


def test_every_two_way_split_of_every_marker():
    text = render_response("We think.", "Paris")
    for cut in range(len(text) + 1):
        stream, pieces = _feed_split(text, [cut])
        assert (stream.chars["analysis"], stream.chars["final"]) == (9, 5), cut


def test_marker_split_across_deltas_is_held_back():
    stream = HarmonyStream()
    assert stream.feed("<|chan") == []
    assert stream.feed("nel|>analysis<|mes") == [("marker", "<|channel|>"), ("marker", "analysis")]
    assert stream.feed("sage|>Hi") == [("marker", "<|message|>"), ("analysis", "Hi")]
    assert stream.channel == "analysis"


def test_false_marker_prefix_is_released_as_text():
    stream = HarmonyStream()
    stream.feed("<|channel|>final<|message|>a <|")
    assert stream.feed("b") == [("final", "<|b")]
    assert stream.feed("x<|e") == [("final", "x")]
    assert stream.close() == [("final", "<|e")]
    assert stream.chars["final"] == len("a <|bx<|e")


def test_text_before_any_marker_is_final():
    stream = HarmonyStream()
    assert stream.feed("Paris is the capital.") == [("final", "Paris is the capital.")]
    assert not stream.saw_markers


def test_tool_call_goes_to_commentary():
    text = (
        "<|channel|>analysis<|message|>Need weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location": "Tokyo"}<|call|>'
    )
    parts = parse_response(text)
    assert parts["analysis"] == "Need weather."
    assert parts["commentary"] == '{"location": "Tokyo"}'
    assert parts["final"] == ""


def test_classify_delta_per_event():
    stream = HarmonyStream()
    events = [
        "<|channel|>",
        "analysis",
        "<|message|>",
        "Think",
        "<|end|>",
        "<|start|>",
        "assistant",
        "<|channel|>final<|message|>",
        "Par",
        "is",
        "<|return|>",
        "<|ret",
    ]
    kinds = [stream.classify_delta(e) for e in events]
    assert kinds == [
        "marker",
        "marker",
        "marker",
        "reasoning",
        "marker",
        "marker",
        "marker",
        "marker",
        "content",
        "content",
        "marker",
        "empty",
    ]


def test_delta_kind_prefers_content():
    assert delta_kind([("analysis", "a"), ("marker", "<|end|>"), ("final", "b")]) == "content"
    assert delta_kind([]) == "empty"


def test_feed_is_linear():
    chunk = "word <|" * 2000
    stream = HarmonyStream()
    stream.feed("<|channel|>final<|message|>")

    def feed_500() -> float:  # CPU seconds, which a busy machine does not inflate as it does wall time
        start = time.process_time()
        for _ in range(500):
            stream.feed(chunk)
        return time.process_time() - start

    first, second = feed_500(), feed_500()
    assert stream.chars["final"] == len(chunk) * 1000 - len("<|")
    assert second < 2 * first + 0.005  # work growing with what came before: the second 500 would cost 3x


@pytest.mark.parametrize(
    "text",
    [
        "analysisWe need to answer 2+2.assistantfinal4",
        "analysisUser asks about Paris. Provide answer.",
        "The answer is 4.assistantfinal4",
    ],
)
def test_markers_missing_detects_stripped_harmony(text):
    assert markers_missing(text)


@pytest.mark.parametrize(
    "text",
    [
        render_response("We need to answer.", "4"),
        "The answer is 4.",
        "analysis of the data shows growth",
        "Analysis: the data shows growth",
        "",
    ],
)
def test_markers_missing_ignores_normal_text(text):
    assert not markers_missing(text)


def test_dangerous_stops_flags_the_trap():
    flagged = dict(dangerous_stops(["<|message|>", "<|end|>", "<|channel|>", "<|return|>"]))
    assert set(flagged) == {"<|message|>", "<|end|>", "<|channel|>"}
    assert "0 tokens" in flagged["<|message|>"]
    assert "final" in flagged["<|end|>"]


def test_dangerous_stops_flags_start_and_header_words():
    flagged = dict(dangerous_stops(["<|start|>", "analysis", "assistant", "final", "|>"]))
    assert set(flagged) == {"<|start|>", "analysis", "assistant", "final", "|>"}


def test_response_end_stops_and_free_text_are_safe():
    assert dangerous_stops(list(RESPONSE_END_STOPS)) == []
    assert dangerous_stops(["\n\n", "###", "", "return|>", "</s>"]) == []


def test_constrain_is_flagged_for_tool_calls():
    assert [s for s, _ in dangerous_stops(["<|constrain|>", "to=functions"])] == ["<|constrain|>", "to=functions"]


def test_header_does_not_leak_into_next_message():
    # A message without a header must not inherit the previous message's channel.
    parts = parse_response("<|channel|>analysis<|message|>a<|end|><|message|>b<|return|>")
    assert (parts["analysis"], parts["final"]) == ("a", "b")
