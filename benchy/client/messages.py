"""Anthropic's Messages API (`--endpoint messages`, POST /v1/messages): the request body, the
stream's events read into the same record as a chat stream, and a whole answer read as a chat
completion's.

Its stream: `message_start` (the message, with the input side of usage), `content_block_start`,
`content_block_delta` (a `text_delta`'s text is the answer, a `thinking_delta`'s thinking is
reasoning; a signature is no text), `content_block_stop`, `message_delta`
(the stop reason and the output side of usage, cumulative), and `message_stop`, the stream's
end (there is no `[DONE]`). An `error` event fails the request with kind server_error.

Tool calls are output (client/tools.py): a `tool_use` block's name when it starts, its input's
`input_json_delta` fragments as they stream; a whole answer's `tool_use` blocks as chat's
tool_calls (the input as JSON text); stop_reason `tool_use` is chat's `tool_calls`.

Usage is Anthropic's: `input_tokens` counts the prompt tokens that were NOT read from the cache,
so the prompt is input_tokens + cache_read_input_tokens + cache_creation_input_tokens, and the
cached tokens are cache_read_input_tokens.
"""

from __future__ import annotations

import json
from typing import overload

from benchy.client import history, tools
from benchy.client.booking import Booker
from benchy.jsontypes import JsonObject

# Anthropic's stop reasons in chat's words: the checks read finish_reason as chat names it.
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def payload(model: str | None, prompt: str, max_tokens: int, stream: bool, extra: JsonObject | None) -> JsonObject:
    """The Messages body (max_tokens is required by the API). A conversation (extra
    `messages`, as multi-turn sends it) replaces the one message; chat's `stop` becomes
    `stop_sequences`; other options go as they are."""
    options = dict(extra or {})
    messages = options.pop("messages", None) or [{"role": "user", "content": prompt}]
    system = None
    if history.has_tools(messages):  # an agent's history (client/history.py)
        system, messages = history.messages_body(messages)
    body: JsonObject = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }
    if system is not None:
        body["system"] = system
    if "stop" in options:
        body["stop_sequences"] = options.pop("stop")
    body.update(options)
    return body


@overload
def chat_usage(usage: JsonObject) -> JsonObject: ...
@overload
def chat_usage(usage: object) -> object: ...
def chat_usage(usage: object) -> object:
    """Anthropic usage in chat's names (see the module docstring for the prompt's sum); what
    is not an object is returned as it is, for the reader to count as malformed."""
    if not isinstance(usage, dict):
        return usage
    counts = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    whole = all(c is None or (isinstance(c, int) and not isinstance(c, bool)) for c in counts)
    prompt = sum(c or 0 for c in counts) if whole and counts[0] is not None else counts[0]
    out: JsonObject = {"prompt_tokens": prompt, "completion_tokens": usage.get("output_tokens")}
    if usage.get("cache_read_input_tokens") is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage["cache_read_input_tokens"]}
    return out


def as_chat(obj: object) -> object:
    """A whole (non-streamed) Messages answer as a chat completion: one choice whose message
    holds the text blocks and the thinking blocks, and chat-named usage."""
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return obj
    blocks = [b for b in obj.get("content") or [] if isinstance(b, dict)]
    content = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    thinking = "".join(b["thinking"] for b in blocks if isinstance(b.get("thinking"), str))
    message: JsonObject = {"role": "assistant", "content": content, "reasoning_content": thinking}
    calls = [_chat_call(b) for b in blocks if b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    reason = obj.get("stop_reason")
    choice = {"index": 0, "message": message, "finish_reason": STOP_REASONS.get(str(reason), reason)}
    return {"id": obj.get("id"), "choices": [choice], "usage": chat_usage(obj.get("usage"))}


def _chat_call(block: JsonObject) -> JsonObject:
    """A whole answer's tool_use block as chat's call: its input as the JSON text it was."""
    given = block.get("input")
    arguments = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False, separators=(",", ":"))
    return tools.chat_call(block.get("id"), block.get("name"), arguments)


def book(reader: Booker, obj: JsonObject, now: float) -> None:
    """One parsed event of a Messages stream into the record (see the module docstring)."""
    kind = obj.get("type")
    if kind == "content_block_delta":
        _delta(reader, obj.get("delta"), now, obj.get("index"))
    elif kind == "content_block_start":
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            tools.book_piece(reader, now, obj.get("index"), block.get("name"))
    elif kind == "message_start":
        message = obj.get("message")
        _counts(reader, message.get("usage") if isinstance(message, dict) else None)
    elif kind == "message_delta":
        _stop(reader, obj)
        if isinstance(obj.get("timings"), dict):  # a llama.cpp that sends its own
            reader.rec.server_timings = obj["timings"]
    elif kind == "message_stop":
        reader.done = True
    elif kind == "error":
        err = obj.get("error")
        reader.fail("server_error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
    elif not isinstance(kind, str):
        reader.bad_events += 1


def _delta(reader: Booker, delta: object, now: float, index: object) -> None:
    if not isinstance(delta, dict):
        reader.bad_events += 1
        return
    kind = delta.get("type")
    if kind == "input_json_delta":  # a tool call's input, streamed (its block's index names it)
        tools.book_piece(reader, now, index, delta.get("partial_json"))
        return
    key = "text" if kind == "text_delta" else "thinking" if kind == "thinking_delta" else None
    if key is None:
        return  # a signature: no text
    text = delta.get(key)
    if not isinstance(text, str):
        reader.bad_events += 1
    elif text:
        reader.book_text(now, text, "") if key == "text" else reader.book_text(now, "", text)


def _counts(reader: Booker, usage: object) -> None:
    """message_start's usage, updated by message_delta's (cumulative), kept in reader.state."""
    if usage is None:
        return
    if not isinstance(usage, dict):
        reader.bad_events += 1
        return
    reader.state.update({k: usage[k] for k in _USAGE_KEYS if usage.get(k) is not None})


def _stop(reader: Booker, obj: JsonObject) -> None:
    delta = obj.get("delta")
    reason = delta.get("stop_reason") if isinstance(delta, dict) else None
    if isinstance(reason, str):
        reader.rec.finish_reason = STOP_REASONS.get(reason, reason)
    _counts(reader, obj.get("usage"))
    if "input_tokens" in reader.state or "output_tokens" in reader.state:
        reader.book_usage(chat_usage(reader.state))
