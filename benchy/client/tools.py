"""Tool calls are output. A server that answers with a function call streams no content: its
answer is the call's name and arguments (chat `delta.tool_calls[].function`, Responses
`function_call` items and `response.function_call_arguments.delta`, Messages `tool_use` blocks
and `input_json_delta`). Read as text they were not, such an answer was "empty" and failed.

Here each piece of a call (its name when it opens, each fragment of its arguments) is booked as
a token event of kind TOOL (records.TOOL), so that the arguments' text is counted like any other
text (benchy's tokenizer, the server's /tokenize), TTFT is the first token of any kind, and the
time to the first tool call and a parser that holds the arguments back (one burst at the end,
the buffering rule of evidence.py) follow from the event times as they do for content. Each
call is counted once (`rec.tool_calls`: parallel calls are several).

The request side: the tools of `--tools` and a scenario's `tools` (OpenAI function
definitions, loaded and checked by workloads/tools.py) and the `--tool-choice`, in each API's
words (`request_fields`).
"""

from __future__ import annotations

from typing import Any

from benchy.client.booking import Booker
from benchy.jsontypes import JsonObject

# tool_choice's words every API shares; any other choice names a function (workloads/tools.py
# checks the flag and the scenario key).
CHOICES = ("auto", "required", "none")


# ---------------------------------------------------------------- the request side


def request_fields(tools: list[JsonObject], choice: str | None, endpoint: str) -> JsonObject:
    """The body fields that send `tools` and `choice` on `endpoint`: chat's as given, the
    Responses API's flattened ({type, name, description, parameters}), the Messages API's as
    {name, description, input_schema} with its own tool_choice ({"type": "any"} for required)."""
    fns = [t["function"] for t in tools]
    if choice is not None and not isinstance(choice, str):  # an API's own tool_choice object
        return {"tools": request_fields(tools, None, endpoint)["tools"], "tool_choice": choice}
    if endpoint == "responses":
        out: JsonObject = {"tools": [{"type": "function", **fn} for fn in fns]}
        if choice is not None:
            out["tool_choice"] = choice if choice in CHOICES else {"type": "function", "name": choice}
        return out
    if endpoint == "messages":
        schema = {"type": "object", "properties": {}}
        out = {"tools": [_anthropic_tool(fn, schema) for fn in fns]}
        if choice is not None:
            by = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
            out["tool_choice"] = by.get(choice) or {"type": "tool", "name": choice}
        return out
    out = {"tools": tools}
    if choice is not None:
        out["tool_choice"] = choice if choice in CHOICES else {"type": "function", "function": {"name": choice}}
    return out


def with_tools(
    extra: JsonObject | None, listed: list[Any] | None, choice: str | None, endpoint: str
) -> JsonObject | None:
    """A request's extra fields with its tools in `endpoint`'s words: a scenario's `tools` and
    `tool_choice` (OpenAI function definitions, in `extra`) over the run's --tools and
    --tool-choice. Tools in another shape (an API's own, through --extra-body) go as given."""
    if listed is None and choice is None and not (extra and ("tools" in extra or "tool_choice" in extra)):
        return extra  # no tools: the request as it was (this runs for every request)
    given = dict(extra or {})
    listed = given.pop("tools", None) or listed
    choice = given.pop("tool_choice", None) or choice
    if listed is None or not _openai_shaped(listed):
        if listed is not None:
            given["tools"] = listed
        if choice is not None:
            given["tool_choice"] = choice
        return given or extra
    given.update(request_fields(listed, choice, endpoint))
    return given


def _openai_shaped(listed: object) -> bool:
    """Whether `listed` is OpenAI function definitions (what request_fields converts)."""
    return isinstance(listed, list) and all(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name") for t in listed
    )


def _anthropic_tool(fn: JsonObject, schema: JsonObject) -> JsonObject:
    tool = {"name": fn["name"], "input_schema": fn.get("parameters") or schema}
    if fn.get("description"):
        tool["description"] = fn["description"]
    return tool


# ---------------------------------------------------------------- the answer side


def book_piece(reader: Booker, now: float, call: object, text: object) -> None:
    """One piece of a tool call (`call`: what names the call within its answer, its index or
    id): the call counted once, its text booked as a TOOL event; text not a string is a
    malformed event."""
    seen: set[object] = reader.state.setdefault("tool_calls", set())
    if call not in seen:
        seen.add(call)
        reader.rec.tool_calls = len(seen)
    if text is None:
        return
    if not isinstance(text, str):
        reader.bad_events += 1
    elif text:
        reader.book_tool(now, text)


def book_chat_delta(reader: Booker, calls: object, now: float) -> None:
    """A chat delta's `tool_calls`: each entry's function name (when the call opens) and its
    arguments' fragment, as one text, the call known by its `index`."""
    if not isinstance(calls, list):
        reader.bad_events += 1
        return
    for position, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        parts = (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (0,)
        if any(p is not None and not isinstance(p, str) for p in parts):
            reader.bad_events += 1
            continue
        assert isinstance(call, dict)
        book_piece(reader, now, call.get("index", position), "".join(p for p in parts if isinstance(p, str)))


def book_chat_message(reader: Booker, calls: object, now: float) -> None:
    """A whole chat message's `tool_calls` (a non-streamed answer, or another API's in chat's
    shape): each call's name and arguments, one event each at the answer's end."""
    if not isinstance(calls, list):
        reader.bad_events += 1
        return
    book_chat_delta(reader, [{**c, "index": i} if isinstance(c, dict) else c for i, c in enumerate(calls)], now)


def chat_call(call_id: object, name: object, arguments: object) -> JsonObject:
    """A tool call in a chat message's shape (another API's whole answer, read as chat's)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
