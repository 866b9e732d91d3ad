"""OpenAI's Responses API (`--endpoint responses`, POST /v1/responses): the request body, the
stream's typed events read into the same record as a chat stream, and a whole answer read as
a chat completion's.

Its stream is typed events, not chat chunks: `response.output_text.delta` (answer text),
`response.reasoning_text.delta` (vLLM's reasoning; OpenAI's summaries,
`response.reasoning_summary_text.delta`, count as reasoning too), and one end event,
`response.completed` (or `response.incomplete` when max_output_tokens cut it), whose `response`
holds the usage. That end event is the stream's end (there is no `[DONE]`). An `error` event, or
`response.failed`, fails the request with kind server_error. Other events (created,
in_progress, *.done) carry no text: they count as events, nothing more.

Tool calls are output (client/tools.py): a `function_call` item's name when it is added
(`response.output_item.added`), its arguments' `response.function_call_arguments.delta`s (or,
where none came, the arguments of its `.done`); an answer of function calls that completed
ends as chat's `tool_calls`.
"""

from __future__ import annotations

from typing import overload

from benchy.client import history, tools
from benchy.client.booking import Booker
from benchy.jsontypes import JsonObject

TEXT = "response.output_text.delta"
ITEM_ADDED = "response.output_item.added"
ARGUMENTS = "response.function_call_arguments.delta"
ARGUMENTS_DONE = "response.function_call_arguments.done"
REASONING = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
ENDS = frozenset({"response.completed", "response.incomplete"})
FAILURES = frozenset({"error", "response.failed"})
# A Responses stop reason, in chat's words: the checks read finish_reason as chat names it.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def payload(model: str | None, prompt: str, max_tokens: int, stream: bool, extra: JsonObject | None) -> JsonObject:
    """The Responses body. A conversation (extra `messages`, as multi-turn sends it) becomes
    `input`, a list of message items; chat's `reasoning_effort` becomes `reasoning.effort`; other options go as they are."""
    options = dict(extra or {})
    messages = options.pop("messages", None)
    # Each item typed: OpenAI infers a bare {role, content}, llama.cpp's server refuses it.
    if messages is not None and history.has_tools(messages):
        items: list[JsonObject] | None = history.responses_items(messages)  # an agent's history (client/history.py)
    else:
        items = [{"type": "message", **m} for m in messages] if messages is not None else None
    body: JsonObject = {"model": model, "input": items if items is not None else prompt}
    body.update({"max_output_tokens": max_tokens, "temperature": 0, "stream": stream})
    effort = options.pop("reasoning_effort", None)
    if effort:
        body["reasoning"] = {"effort": effort}
    body.update(options)
    return body


@overload
def chat_usage(usage: JsonObject) -> JsonObject: ...
@overload
def chat_usage(usage: object) -> object: ...
def chat_usage(usage: object) -> object:
    """A Responses usage object in chat's names (what the record's usage reader takes);
    anything that is not an object is returned as it is, for the reader to count as malformed."""
    if not isinstance(usage, dict):
        return usage
    out = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    for ours, theirs in (
        ("prompt_tokens_details", "input_tokens_details"),
        ("completion_tokens_details", "output_tokens_details"),
    ):
        if usage.get(theirs) is not None:
            out[ours] = usage[theirs]
    return out


def finish_reason(response: JsonObject, called: bool = False) -> str:
    """In chat's words; `called`: the answer held function calls (also where the end event's
    `output` does not list them)."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if response.get("status") == "incomplete":
        return _INCOMPLETE.get(str(reason), str(reason or "length"))
    output = response.get("output")
    items = output if isinstance(output, list) else []
    if called or any(isinstance(i, dict) and i.get("type") == "function_call" for i in items):
        return "tool_calls"
    return "stop"


def as_chat(obj: object) -> object:
    """A whole (non-streamed) Responses answer as a chat completion: one choice whose message
    holds the output text and the reasoning text, and chat-named usage."""
    if not isinstance(obj, dict) or obj.get("object") != "response":
        return obj
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonObject] = []
    for item in obj.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append(tools.chat_call(item.get("call_id"), item.get("name"), item.get("arguments")))
            continue
        texts = [p.get("text") for p in item.get("content") or [] if isinstance(p, dict)]
        texts += [p.get("text") for p in item.get("summary") or [] if isinstance(p, dict)]
        (reasoning if item.get("type") == "reasoning" else content).extend(t for t in texts if isinstance(t, str))
    message: JsonObject = {"role": "assistant", "content": "".join(content), "reasoning_content": "".join(reasoning)}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": finish_reason(obj)}
    return {"id": obj.get("id"), "choices": [choice], "usage": chat_usage(obj.get("usage"))}


def book(reader: Booker, obj: JsonObject, now: float) -> None:
    """One parsed event of a Responses stream into the record (see the module docstring)."""
    kind = obj.get("type")
    if kind == TEXT or kind in REASONING:
        text = obj.get("delta")
        if not isinstance(text, str):
            reader.bad_events += 1
        elif text:
            reader.book_text(now, text, "") if kind == TEXT else reader.book_text(now, "", text)
    elif kind == ITEM_ADDED or kind == ARGUMENTS or kind == ARGUMENTS_DONE:
        _tool_call(reader, kind, obj, now)
    elif kind in ENDS:
        _end(reader, obj.get("response"))
        if isinstance(obj.get("timings"), dict):  # llama.cpp's, beside the response
            reader.rec.server_timings = obj["timings"]
    elif kind in FAILURES:
        _failure(reader, obj)
    elif not isinstance(kind, str):
        reader.bad_events += 1


def _end(reader: Booker, response: object) -> None:
    reader.done = True
    if not isinstance(response, dict):
        reader.bad_events += 1
        return
    reader.rec.finish_reason = finish_reason(response, reader.rec.tool_calls > 0)
    usage = response.get("usage")
    if usage is not None:
        if isinstance(usage, dict):
            reader.book_usage(chat_usage(usage))
        else:
            reader.bad_events += 1


def _tool_call(reader: Booker, kind: str, obj: JsonObject, now: float) -> None:
    """A function call's events: its name as its item is added, its arguments as they stream
    (a `.done` books them only where no delta came: a server that sends them whole)."""
    if kind == ITEM_ADDED:
        item = obj.get("item")
        if not isinstance(item, dict):
            reader.bad_events += 1
        elif item.get("type") == "function_call":
            tools.book_piece(reader, now, _call_key(obj, item), item.get("name"))
        return
    key = _call_key(obj, obj)
    streamed: set[object] = reader.state.setdefault("arguments_streamed", set())
    if kind == ARGUMENTS:
        streamed.add(key)
        tools.book_piece(reader, now, key, obj.get("delta"))
    elif key not in streamed:
        tools.book_piece(reader, now, key, obj.get("arguments"))


def _call_key(obj: JsonObject, item: JsonObject) -> object:
    """What names a function call across its events: its output_index, else its item's id."""
    index = obj.get("output_index")
    return index if index is not None else item.get("item_id") or item.get("id")


def _failure(reader: Booker, obj: JsonObject) -> None:
    response = obj.get("response")
    err = response.get("error") if isinstance(response, dict) else obj.get("error", obj)
    message = err.get("message", err) if isinstance(err, dict) else err
    reader.fail("server_error", str(message or obj.get("message") or obj)[:300])
