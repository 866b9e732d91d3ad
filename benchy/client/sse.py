"""Incremental server-sent-events parser: bytes in (any chunking), `data` payloads out (bytes).

Follows the WHATWG event-stream rules that matter for LLM servers: lines end in LF, CRLF or CR;
`data:` lines of one event are joined with LF; a blank line dispatches; lines starting with `:`
are comments; other fields (`event:`, `id:`, `retry:`) are ignored. Payloads stay bytes: a UTF-8
character split across chunks is whole once its event is, and the JSON parser (orjson) reads
bytes directly, so nothing is decoded twice.
"""

from __future__ import annotations


class SSEParser:
    __slots__ = ("_buf", "_data", "_has_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._has_data = False

    def idle(self) -> bool:
        """Nothing is pending: the next chunk starts a new event at a new line."""
        return not self._buf and not self._has_data

    def feed(self, chunk: bytes) -> list[bytes]:
        """Returns the data payloads of every event completed by this chunk."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            return self._feed_lines(buf)
        # Fast path (LF line ends, as every LLM server sends): whole events are cut at blank
        # lines, and the usual one-line `data: …` event is sliced out without a line loop.
        # What follows the last blank line waits, unparsed, in _buf.
        events: list[bytes] = []
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            if buf.startswith(b"data: ", start) and not self._has_data and buf.find(b"\n", start, end) < 0:
                events.append(buf[start + 6 : end])
            else:
                for line in buf[start:end].split(b"\n"):
                    self._line(line, events)
                self._line(b"", events)
            start = end + 2
        self._buf = buf[start:]
        return events

    def _feed_lines(self, buf: bytes) -> list[bytes]:
        """The general path, line by line (CR and CRLF line ends)."""
        events: list[bytes] = []
        start = 0
        n = len(buf)
        while start < n:
            end, nxt = _line_end(buf, start)
            if end < 0:
                break
            self._line(buf[start:end], events)
            start = nxt
        self._buf = buf[start:]
        return events

    def close(self) -> list[bytes]:
        """End of stream. A pending event is delivered even without its closing blank line:
        some servers omit it, and dropping it would lose the usage chunk."""
        events: list[bytes] = self._feed_lines(self._buf) if self._buf else []
        if self._buf:
            self._line(self._buf.rstrip(b"\r"), events)
            self._buf = b""
        if self._has_data:
            self._dispatch(events)
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if not line:
            if self._has_data:
                self._dispatch(events)
            return
        if line[:1] == b":":
            return
        field, sep, value = line.partition(b":")
        if field != b"data":
            return
        if value[:1] == b" ":
            value = value[1:]
        self._data.append(value)
        self._has_data = True

    def _dispatch(self, events: list[bytes]) -> None:
        events.append(b"\n".join(self._data))
        self._data = []
        self._has_data = False


def _line_end(buf: bytes, start: int) -> tuple[int, int]:
    """(end of line, start of next line), or (-1, -1) if the line is not complete yet.
    A CR at the very end of the buffer may be the first half of CRLF, so it waits."""
    lf = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))
    if cr < 0:
        return (lf, lf + 1) if lf >= 0 else (-1, -1)
    if cr + 1 < len(buf):
        return (cr, cr + 2) if buf[cr + 1 : cr + 2] == b"\n" else (cr, cr + 1)
    return -1, -1
