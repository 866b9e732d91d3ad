"""A non-streamed answer (`--no-stream`, or a scenario's `stream = false`): the whole JSON body
read into the same record a stream fills, so that every count, check and e2e figure works.

Some deployments and gateways stream nothing. The answer then arrives whole: its text is booked
as one event at the body's end (reasoning and content apart, as the API names them), usage and
llama.cpp's timings are read from the body, and the record says `streamed = False`, so that the
figures only a stream can give (TTFT, inter-token latency, decode and prefill rates) are
withheld with the reason (measure/metrics.py, code not_streamed) rather than taken from the
end of the answer. Responses and Messages bodies are read as chat completions (each module's
as_chat). A body that is not a JSON answer fails with kind bad_stream, an `error` object with
kind server_error. reader.py's reader collects the body and hands the parsed answer here.
"""

from __future__ import annotations

from typing import Any

from benchy.client import tools
from benchy.client.booking import Booker


def read(reader: Booker, obj: object, now: float) -> None:
    """The whole answer (parsed JSON, a Responses or Messages one already in chat's shape)
    into the record, its text booked at `now`, the body's end."""
    rec = reader.rec
    rec.end_s = now
    if not isinstance(obj, dict):
        reader.fail("bad_stream", "the answer is not a JSON object")
        return
    if obj.get("error"):
        err = obj["error"]
        reader.fail("server_error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
        return
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if choice is None:
        reader.fail("bad_stream", "the answer has no choice")
        return
    _answer(reader, choice, now)
    usage, timings = obj.get("usage"), obj.get("timings")
    if isinstance(usage, dict):
        reader.book_usage(usage)
    if isinstance(timings, dict):
        rec.server_timings = timings


def _answer(reader: Booker, choice: dict[str, Any], now: float) -> None:
    """The answer's text as events at its end: reasoning, then content, then each tool call
    (its name and arguments: client/tools.py), as the API split them."""
    message = choice.get("message")
    held: dict[str, Any] = message if isinstance(message, dict) else choice
    reasoning = held.get("reasoning_content") or held.get("reasoning")
    content = held.get("content") if isinstance(message, dict) else choice.get("text")
    if isinstance(reasoning, str) and reasoning:
        reader.book_text(now, "", reasoning)
    if isinstance(content, str) and content:
        reader.book_text(now, content, "")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if calls:
        tools.book_chat_message(reader, calls, now)
    elif isinstance(message, dict) and "content" in message and content is None:
        reader.rec.content_null_events += 1
    finish = choice.get("finish_reason")
    if isinstance(finish, str):
        reader.rec.finish_reason = finish
