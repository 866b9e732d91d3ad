"""A chat history (system / user / assistant with tool_calls / tool messages, as an agent
trace and --subagents hold it) in the Responses and Messages APIs' own words, so that agent
replays run on all three APIs (issue 53).

Responses: each message an item of type message; an assistant's tool calls `function_call`
items after its text, a tool's result a `function_call_output` item. Messages: system
messages become the top-level `system`; an assistant's text and tool calls one message of
`text` and `tool_use` blocks; the tool results that follow it one user message of
`tool_result` blocks (the API alternates user and assistant). Each conversion is a function
of the history alone, so what two calls share stays byte for byte the same on every API.
Reasoning (`reasoning_content`) has no field a request may send back on either API: left out.
"""

from __future__ import annotations

import json

from benchy.jsontypes import JsonObject


def has_tools(messages: list[JsonObject]) -> bool:
    """Whether the history holds tool calls or tool results (a plain one is sent as it was)."""
    return any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)


def responses_items(messages: list[JsonObject]) -> list[JsonObject]:
    """The Responses `input` items of a chat history."""
    items: list[JsonObject] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": str(m.get("tool_call_id")), "output": _text(m)})
            continue
        calls = m.get("tool_calls") or []
        if not calls or _text(m):
            items.append({"type": "message", "role": role, "content": _text(m)})
        for call in calls:
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": str(call.get("id")),
                    "name": str(function.get("name")),
                    "arguments": str(function.get("arguments") or "{}"),
                }
            )
    return items


def messages_body(messages: list[JsonObject]) -> tuple[str | None, list[JsonObject]]:
    """(the top-level `system`, the Messages API's `messages`) of a chat history."""
    system = [_text(m) for m in messages if m.get("role") == "system"]
    out: list[JsonObject] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": str(m.get("tool_call_id")), "content": _text(m)}
            if out and out[-1]["role"] == "user" and _all_results(out[-1]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        calls = m.get("tool_calls") or []
        if not calls:
            out.append({"role": role, "content": _text(m)})
            continue
        blocks: list[JsonObject] = [{"type": "text", "text": _text(m)}] if _text(m) else []
        blocks += [_tool_use(call) for call in calls]
        out.append({"role": "assistant", "content": blocks})
    return ("\n\n".join(system) if system else None), out


def _tool_use(call: JsonObject) -> JsonObject:
    function = call.get("function") or {}
    try:
        given = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        given = {"arguments": function.get("arguments")}  # the API takes an object only
    return {
        "type": "tool_use",
        "id": str(call.get("id")),
        "name": str(function.get("name")),
        "input": given if isinstance(given, dict) else {"value": given},
    }


def _all_results(message: JsonObject) -> bool:
    content = message.get("content")
    return isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)


def _text(message: JsonObject) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")
