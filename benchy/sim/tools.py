"""The simulator's tool calls: sent tools, it answers with calls, on chat, Responses and Messages.

A request that names tools (each API's shape: chat's {type, function: {name}}, Responses' flat
{type, name}, Messages' {name, input_schema}) and does not say tool_choice none is answered with
`--tool-calls` calls (0: text all the same, a server that ignores the tools; one where the
request forbids parallel calls: `parallel_tool_calls: false`,
Messages' `disable_parallel_tool_use`), each naming the forced tool or the tools in turn. The
answer's generated tokens after any reasoning are the calls': each call its name's tokens (sent
whole as the call opens, as every server sends a name), then its arguments, a JSON object of one
string made of the planned words: `{"q":"…"}`, one simulator token a character of its frame, so
that this server's /tokenize counts the arguments as it generated them. The truth log records the
calls, their tokens and their arguments' tokens (app.py). `--tool-parser-buffer`: each call's
arguments are held until the call is whole and sent as one event, as a tool-call parser that
buffers does (sglang#36272).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from benchy.jsontypes import JsonObject
from benchy.sim import vocab

FRAME_HEAD = ("{", '"', "q", '"', ":", '"')
FRAME_TAIL = ('"', "}")


class ToolRequestError(ValueError):
    """Tools the API would refuse (HTTP 400); the message is the error's."""


@dataclass(frozen=True)
class ToolAnswer:
    """The calls of one answer: each one's name and token span in the plan (start, where its
    arguments start, end), its id and its arguments' text."""

    names: tuple[str, ...]
    spans: tuple[tuple[int, int, int], ...]
    arguments: tuple[str, ...]

    @property
    def tokens(self) -> int:
        return sum(end - start for start, _, end in self.spans)

    @property
    def argument_tokens(self) -> int:
        return sum(end - args for _, args, end in self.spans)

    def call_at(self, pos: int) -> int:
        """The call whose tokens hold plan position `pos`."""
        return next(i for i, (start, _, end) in enumerate(self.spans) if start <= pos < end)


def requested_calls(body: JsonObject, parallel_calls: int) -> list[str] | None:
    """The names of the calls the answer to `body` holds; None: it answers with text."""
    tools = body.get("tools")
    if tools is None or tools == [] or parallel_calls == 0:  # 0: a server that answers text anyway
        return None
    if not isinstance(tools, list):
        raise ToolRequestError("'tools' must be a list")
    names = [_name(t) for t in tools]
    if not all(names):
        raise ToolRequestError("each of 'tools' must name a function")
    choice = body.get("tool_choice", "auto")
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if kind == "none":
        return None
    forced = _forced(choice)
    if forced is not None and forced not in names:
        raise ToolRequestError(f"tool_choice names {forced!r}, which is not among the tools")
    parallel = body.get("parallel_tool_calls") is not False
    if isinstance(choice, dict) and choice.get("disable_parallel_tool_use"):
        parallel = False
    calls = parallel_calls if parallel else 1
    return [forced or str(names[i % len(names)]) for i in range(calls)]


def _name(tool: object) -> str | None:
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function")
    name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
    return name if isinstance(name, str) and name else None


def _forced(choice: object) -> str | None:
    """The one function a tool_choice object forces (chat, Responses or Messages shape)."""
    if not isinstance(choice, dict):
        return None
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, dict) else choice.get("name")
    return name if isinstance(name, str) else None


def plan_calls(names: list[str], words: list[str], start: int) -> tuple[list[str], ToolAnswer]:
    """The texts of `len(words)` generated tokens that make the calls (from plan position
    `start`), and the answer's spans. The tokens are shared out evenly; a call cut short by the
    output length keeps what fits (a name cut short, arguments that are no JSON yet)."""
    n = len(words)
    names = names[: max(1, n)]
    base, extra = divmod(n, len(names))
    texts: list[str] = []
    spans, arguments = [], []
    used = 0
    for i, name in enumerate(names):
        m = base + (1 if i < extra else 0)
        head = vocab.pieces(name)
        middle = max(0, m - len(head) - len(FRAME_HEAD) - len(FRAME_TAIL))
        call = [*head, *FRAME_HEAD, *(w.strip() or "x" for w in words[used : used + middle]), *FRAME_TAIL][:m]
        call = [*call[: len(head) + len(FRAME_HEAD)], *_spaced(call[len(head) + len(FRAME_HEAD) :])]
        used += middle
        at = start + len(texts)
        texts += call
        args_start = at + min(len(head), m)
        spans.append((at, args_start, at + m))
        arguments.append("".join(call[min(len(head), m) :]))
    return texts, ToolAnswer(tuple(names), tuple(spans), tuple(arguments))


def _spaced(tokens: list[str]) -> list[str]:
    """The string's words one space apart (each word with its leading space but the first: one
    simulator token each), the frame's tail as it is."""
    out, first = [], True
    for token in tokens:
        if token in FRAME_TAIL:
            out.append(token)
            continue
        out.append(token if first else " " + token)
        first = False
    return out


def chat_calls(answer: ToolAnswer) -> list[JsonObject]:
    """The calls in a whole chat message's shape."""
    return [
        {"id": call_id(i), "type": "function", "function": {"name": name, "arguments": answer.arguments[i]}}
        for i, name in enumerate(answer.names)
    ]


def call_id(i: int) -> str:
    return f"call_{i}"


def parsed_input(arguments: str) -> JsonObject:
    """A Messages tool_use block's input: the arguments' object (cut short: empty)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
