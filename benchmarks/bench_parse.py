"""The streamed client's parsing cost alone: CPU per token of benchy.client.http1's exchange (httptools)
and the SSE reader, fed a pre-rendered 256-token chunked stream, one event per read, no sockets.

A developer benchmark, not a test. It isolates what benchy adds per token on top of reading the
socket (`make bench-client` measures the whole client, wake-ups included), so two versions of
the parser can be compared on a busy machine: `python benchmarks/bench_parse.py [TREE]` runs the
benchy found in TREE (default: this checkout), e.g. an older commit unpacked with `git archive`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

TOKENS = 256
HEAD = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "benchy-sim"}


def chunk(obj: dict) -> bytes:
    data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def delta(content: str | None, finish: str | None = None) -> dict:
    d = {} if content is None else {"content": content}
    return {**HEAD, "choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}]}


def reads() -> list[bytes]:
    """The response as the pump servers send it: the head, then one chunk (one event) a read."""
    out = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"]
    out += [chunk(delta(f" tok{i}")) for i in range(TOKENS)]
    out += [chunk(delta(None, "length")), chunk({**HEAD, "choices": [], "usage": {"completion_tokens": TOKENS}})]
    return out + [b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"]


async def one_stream(stream: list[bytes]) -> None:
    from benchy.client.http1 import Response, _Connection, _Exchange
    from benchy.records import RequestRecord

    try:
        from benchy.client.reader import StreamReader
    except ImportError:  # an older TREE, whose reader is benchy.client.stream._StreamReader
        from benchy.client.stream import _StreamReader as StreamReader  # type: ignore[no-redef]

    rec = RequestRecord(
        case="c", run=0, index=0, warmup=False, request_id="r", nonce=None, target_prompt_tokens=1,
        target_output_tokens=TOKENS,
    )  # fmt: skip
    try:
        from benchy.client.draft import Draft

        booked: Any = Draft(rec)  # the reader books into the client's draft, which makes the record
    except ImportError:  # an older TREE: the reader fills the record itself
        booked = rec
    reader = StreamReader(booked)
    exchange = _Exchange(_Connection(), Response(), lambda r: True, reader.feed, 60)
    for data in stream:
        exchange.received(data, time.perf_counter())
    reader.close(1.0)
    assert booked.completion_tokens == TOKENS and len(booked.token_event_s) == TOKENS


async def main() -> None:
    stream = reads()
    for _ in range(50):
        await one_stream(stream)
    per_token = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(200):
            await one_stream(stream)
        per_token.append((time.process_time() - start) / (200 * TOKENS) * 1e6)
    per_token.sort()
    print(f"parsing CPU per token: best {per_token[0]:.2f} µs, median {per_token[3]:.2f} µs (7 × 200 streams)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent).resolve()))
    asyncio.run(main())
