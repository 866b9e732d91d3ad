"""The SSE parser: exact reassembly however a stream is chunked, and no exception on garbage."""
from hypothesis import given, settings, strategies as st

from benchy.sse import SSEParser


def parse_in_chunks(data: bytes, cuts: list[int]) -> list[str]:
    parser = SSEParser()
    events: list[str] = []
    last = 0
    for cut in sorted(set(c % (len(data) + 1) for c in cuts)):
        events += parser.feed(data[last:cut])
        last = cut
    events += parser.feed(data[last:])
    return events + parser.close()


def test_basic_events_comments_and_multiline_data():
    stream = b': keep-alive\n\ndata: {"a":1}\n\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
    assert parse_in_chunks(stream, []) == ['{"a":1}', "line1\nline2", "[DONE]"]


def test_crlf_and_cr_line_endings():
    assert parse_in_chunks(b"data: a\r\n\r\ndata: b\r\rdata:c\n\n", []) == ["a", "b", "c"]


def test_crlf_split_between_chunks_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r\n") == ["a"]


def test_split_utf8_character_is_decoded_whole():
    data = "data: héllo ✓\n\n".encode()
    split = data.index("✓".encode()) + 1
    parser = SSEParser()
    assert parser.feed(data[:split]) == []
    assert parser.feed(data[split:]) == ["héllo ✓"]


def test_last_event_without_blank_line_is_delivered_at_close():
    parser = SSEParser()
    assert parser.feed(b'data: {"usage":1}') == []
    assert parser.close() == ['{"usage":1}']


payloads = st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                            max_size=40), min_size=1, max_size=8)


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
