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

The request side: `--tools FILE|builtin` (OpenAI function definitions) and `--tool-choice`
(auto|required|none|NAME), converted for each API by `request_fields`.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchy.client.booking import Booker

BUILTIN = "builtin"
# --tools builtin: two small functions any template renders; `search`, `read_file`: one sim
# token or a few for the name (the simulator answers with the first unless told otherwise).
BUILTIN_TOOLS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the code base for a text and return the matching lines.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to look for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the code base.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "the file's path"}},
                "required": ["path"],
            },
        },
    },
]
CHOICES = ("auto", "required", "none")


class ToolsError(ValueError):
    """A bad --tools or --tool-choice; the message is one line."""


# ---------------------------------------------------------------- the request side


def load(spec: str) -> list[dict]:
    """The tools `--tools` names: `builtin`, or a JSON file of OpenAI function definitions
    (a list, or an object with a `tools` list), each checked (function_names)."""
    if spec == BUILTIN:
        return [dict(t) for t in BUILTIN_TOOLS]
    path = Path(spec).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolsError(f"--tools {spec}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolsError(f"--tools {spec} is not valid JSON: {str(exc).splitlines()[0]}") from None
    tools = data.get("tools") if isinstance(data, dict) else data
    return checked(tools, f"--tools {spec}")


def checked(tools: object, where: str = "--tools") -> list[dict]:
    """`tools` if it is a non-empty list of OpenAI function definitions; ToolsError else."""
    if not isinstance(tools, list) or not tools:
        raise ToolsError(f'{where}: expected a non-empty list of {{"type": "function", "function": {{...}}}}')
    function_names(tools, where)
    return tools


def function_names(tools: list, where: str = "--tools") -> list[str]:
    """Each tool's function name; ToolsError (one line) for one that is no function definition."""
    names = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name or tool.get("type", "function") != "function":
            raise ToolsError(f'{where}: tool {i + 1} is not {{"type": "function", "function": {{"name": …}}}}')
        names.append(name)
    return names


def check_choice(choice: str, tools: list[dict] | None, where: str = "--tool-choice") -> str:
    """`choice` if it is auto, required, none or the name of one of `tools`."""
    if not tools:
        raise ToolsError(f"{where} needs tools to choose from: pass --tools FILE|builtin")
    if choice not in CHOICES and choice not in function_names(tools):
        raise ToolsError(f"{where} {choice}: not one of {', '.join(CHOICES)} nor a tool's name")
    return choice


def request_fields(tools: list[dict], choice: str | None, endpoint: str) -> dict:
    """The body fields that send `tools` and `choice` on `endpoint`: chat's as given, the
    Responses API's flattened ({type, name, description, parameters}), the Messages API's as
    {name, description, input_schema} with its own tool_choice ({"type": "any"} for required)."""
    fns = [t["function"] for t in tools]
    if choice is not None and not isinstance(choice, str):  # an API's own tool_choice object
        return {"tools": request_fields(tools, None, endpoint)["tools"], "tool_choice": choice}
    if endpoint == "responses":
        out: dict = {"tools": [{"type": "function", **fn} for fn in fns]}
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


def with_tools(extra: dict | None, listed: list | None, choice: str | None, endpoint: str) -> dict | None:
    """A request's extra fields with its tools in `endpoint`'s words: a scenario's `tools` and
    `tool_choice` (OpenAI function definitions, in `extra`) over the run's --tools and
    --tool-choice. Tools in another shape (an API's own, through --extra-body) go as given."""
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
    try:
        function_names(listed)  # type: ignore[arg-type]
    except (ToolsError, AttributeError, TypeError):
        return False
    return True


def _anthropic_tool(fn: dict, schema: dict) -> dict:
    tool = {"name": fn["name"], "input_schema": fn.get("parameters") or schema}
    if fn.get("description"):
        tool["description"] = fn["description"]
    return tool


# ---------------------------------------------------------------- the answer side


def book_piece(reader: Booker, now: float, call: object, text: object) -> None:
    """One piece of a tool call (`call`: what names the call within its answer, its index or
    id): the call counted once, its text booked as a TOOL event; text not a string is a
    malformed event."""
    seen: set = reader.state.setdefault("tool_calls", set())
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


def chat_call(call_id: object, name: object, arguments: object) -> dict:
    """A tool call in a chat message's shape (another API's whole answer, read as chat's)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
