"""The SSE parser: exact reassembly however a stream is chunked, and no exception on garbage."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from benchy.client.sse import SSEParser
from tests.conftest import bare_record


def parse_in_chunks(data: bytes, cuts: list[int]) -> list[str]:
    """The payloads, decoded (the parser hands out bytes, for the JSON parser to read)."""
    parser = SSEParser()
    events: list[bytes] = []
    last = 0
    for cut in sorted(set(c % (len(data) + 1) for c in cuts)):
        events += parser.feed(data[last:cut])
        last = cut
    events += parser.feed(data[last:])
    return [e.decode("utf-8", errors="replace") for e in events + parser.close()]


def test_basic_events_comments_and_multiline_data():
    stream = b': keep-alive\n\ndata: {"a":1}\n\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
    assert parse_in_chunks(stream, []) == ['{"a":1}', "line1\nline2", "[DONE]"]


def test_crlf_and_cr_line_endings():
    assert parse_in_chunks(b"data: a\r\n\r\ndata: b\r\rdata:c\n\n", []) == ["a", "b", "c"]


def test_crlf_split_between_chunks_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r\n") == [b"a"]


def test_split_utf8_character_is_decoded_whole():
    data = "data: héllo ✓\n\n".encode()
    split = data.index("✓".encode()) + 1
    parser = SSEParser()
    assert parser.feed(data[:split]) == []
    assert parser.feed(data[split:]) == ["héllo ✓".encode()]


def test_last_event_without_blank_line_is_delivered_at_close():
    parser = SSEParser()
    assert parser.feed(b'data: {"usage":1}') == []
    assert parser.close() == [b'{"usage":1}']


payloads = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(payloads, st.sampled_from([b"\n", b"\r\n", b"\r"]), st.lists(st.integers(0, 10_000), max_size=12))
def test_reassembles_identically_however_chunked(events, eol, cuts):
    stream = b"".join(b"data: " + e.encode() + eol + eol for e in events)
    assert parse_in_chunks(stream, cuts) == events


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 1000), max_size=8))
def test_never_raises_on_garbage(data, cuts):
    for event in parse_in_chunks(data, cuts):
        assert isinstance(event, str)


# ---- issue 8: split UTF-8 inside JSON, comments and other fields, multi-line data ----------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
wide_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=0x80), max_size=30)
eols = st.sampled_from([b"\n", b"\r\n", b"\r"])
noise_lines = st.lists(
    st.sampled_from([b": keep-alive", b":", b"event: message", b"id: 7", b"retry: 100", b"x-unknown: field", b"data"]),
    max_size=3,
)


def encode_event(lines: list[str], eol: bytes, noise: list[bytes]) -> bytes:
    """One event: noise lines (comments, other fields) mixed in before its data lines.
    A bare `data` line (no colon) is a data line with an empty value, so it is kept out of
    the noise when the expected payload is compared."""
    out = b"".join(n + eol for n in noise if n != b"data")
    out += b"".join(b"data: " + line.encode() + eol for line in lines)
    return out + eol


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from(["content", "role", "x"]), wide_text, min_size=1), min_size=1, max_size=6),
    eols,
    st.lists(st.integers(0, 10_000), max_size=16),
)
def test_json_with_multibyte_text_survives_any_byte_split(objects, eol, cuts):
    """Cuts land anywhere, inside multi-byte characters too; each event still decodes whole."""
    texts = [json.dumps(o, ensure_ascii=False) for o in objects]
    stream = b"".join(encode_event([t], eol, []) for t in texts)
    assert [json.loads(e) for e in parse_in_chunks(stream, cuts)] == objects


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=15),
                min_size=1,
                max_size=4,
            ),
            noise_lines,
        ),
        min_size=1,
        max_size=6,
    ),
    eols,
    st.lists(st.integers(0, 10_000), max_size=12),
)
def test_multiline_data_with_comments_and_fields_reassembles(events, eol, cuts):
    """Data lines of one event are joined with LF; comments and other fields change nothing."""
    stream = b"".join(encode_event(lines, eol, noise) for lines, noise in events)
    assert parse_in_chunks(stream, cuts) == ["\n".join(lines) for lines, _ in events]


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=8), st.lists(st.integers(0, 10_000), max_size=8))
def test_stream_reader_never_raises_on_any_json_shape(values, cuts):
    """The JSON half of the parser: whatever shape each event has, the request is recorded,
    and every event that is not an object is counted as malformed."""
    from benchy.client.draft import Draft
    from benchy.client.reader import StreamReader

    rec = bare_record()
    reader = StreamReader(Draft(rec))
    stream = b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values)
    last = 0
    for cut in sorted(set(c % (len(stream) + 1) for c in cuts)) + [len(stream)]:
        reader.feed(stream[last:cut], 0.5)
        last = cut
    reader.close(1.0)
    rec = reader.rec.record()
    non_objects = sum(not isinstance(v, dict) for v in values)
    assert rec.sse_events == len(values)
    assert reader.bad_events >= non_objects
    assert all(
        isinstance(getattr(rec, f), (int, type(None)))
        for f in ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                '{"choices":5}',
                '{"choices":["x"]}',
                '{"choices":[{"delta":[1]}]}',
                '{"choices":[{"delta":{"content":7}}]}',
                '{"usage":"many"}',
                '{"usage":{"prompt_tokens":"9","completion_tokens":true}}',
                '{"usage":{"prompt_tokens_details":[1]}}',
                "[" * 5000,
                "NaN",
                '{"timings":3}',
                '{"choices":[{"finish_reason":{"a":1}}]}',
            ]
        ),
        min_size=1,
        max_size=10,
    )
)
def test_stream_reader_survives_hostile_shapes(payloads):
    """Shapes that once raised inside the reader (and would have ended the run): wrong types
    where lists, objects and counts belong, nesting deeper than json's recursion limit."""
    from benchy.client.draft import Draft
    from benchy.client.reader import StreamReader

    rec = bare_record()
    reader = StreamReader(Draft(rec))
    reader.feed(b"".join(b"data: " + p.encode() + b"\n\n" for p in payloads), 0.1)
    reader.close(0.2)
    rec = reader.rec.record()
    assert rec.status == "ok" and reader.bad_events >= 1
    assert rec.prompt_tokens is None and rec.completion_tokens is None
    assert rec.finish_reason is None and rec.content_chars == 0


def test_reader_output_does_not_depend_on_chunking():
    """The same well-formed stream, whole or one byte at a time, fills the same record."""
    from benchy.client.draft import Draft
    from benchy.client.reader import StreamReader

    events = [
        {"choices": [{"delta": {"role": "assistant", "content": "héllo ✓"}}]},
        {"choices": [{"delta": {"reasoning_content": "ζ"}}]},
        {"choices": [{"delta": {"content": " 世界"}, "finish_reason": "length"}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}},
        },
    ]
    stream = b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\r\n\r\n" for e in events)
    stream += b": done soon\r\ndata: [DONE]\r\n\r\n"

    def record(chunks: list[bytes]) -> dict:
        rec = bare_record()
        reader = StreamReader(Draft(rec))
        for chunk in chunks:
            reader.feed(chunk, 0.5)
        reader.close(1.0)
        rec = reader.rec.record()
        return rec.to_dict()

    whole = record([stream])
    assert whole == record([stream[i : i + 1] for i in range(len(stream))])
    assert whole["content_chars"] == len("héllo ✓") + len(" 世界") and whole["reasoning_chars"] == 1
    assert whole["completion_tokens"] == 3 and whole["finish_reason"] == "length"
    assert whole["anomalies"] == [] and whole["token_event_kinds"] == "crc"
