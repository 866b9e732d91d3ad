"""The tools a run sends (`--tools FILE|builtin`, a scenario's `tools`) and its `--tool-choice`
(auto|required|none|NAME): OpenAI function definitions, loaded and checked before anything is
sent, a bad one a one-line error. The client sends them in each API's words (client/tools.py);
tool calls are output (docs/tools.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchy.jsontypes import JsonObject

BUILTIN = "builtin"
# --tools builtin: two small functions any template renders; `search`, `read_file`: one sim
# token or a few for the name (the simulator answers with the first unless told otherwise).
BUILTIN_TOOLS: list[JsonObject] = [
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


def load(spec: str) -> list[JsonObject]:
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


def checked(tools: object, where: str = "--tools") -> list[JsonObject]:
    """`tools` if it is a non-empty list of OpenAI function definitions; ToolsError else."""
    if not isinstance(tools, list) or not tools:
        raise ToolsError(f'{where}: expected a non-empty list of {{"type": "function", "function": {{...}}}}')
    function_names(tools, where)
    return tools


def function_names(tools: list[Any], where: str = "--tools") -> list[str]:
    """Each tool's function name; ToolsError (one line) for one that is no function definition."""
    names = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name or tool.get("type", "function") != "function":
            raise ToolsError(f'{where}: tool {i + 1} is not {{"type": "function", "function": {{"name": …}}}}')
        names.append(name)
    return names


def check_choice(choice: str, tools: list[JsonObject] | None, where: str = "--tool-choice") -> str:
    """`choice` if it is auto, required, none or the name of one of `tools`."""
    if not tools:
        raise ToolsError(f"{where} needs tools to choose from: pass --tools FILE|builtin")
    if choice not in CHOICES and choice not in function_names(tools):
        raise ToolsError(f"{where} {choice}: not one of {', '.join(CHOICES)} nor a tool's name")
    return choice
