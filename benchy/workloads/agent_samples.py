"""The shipped agent-trace samples, made here (nothing downloaded): the same kind of coding-agent
task written in each format agent_trace.py reads. Deterministic: tests compare the shipped
files with this output (`python -m benchy.workloads.agent_samples` rewrites them).

Each session: a system prompt every session shares (byte-identical, as an agent's is), a task,
then tool-calling steps (a bash or editor call, its result) a few seconds apart, the tool time
idle; one session forks two sub-agents that each explore with the parent's history and whose
answers the parent resumes with.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np

from benchy.jsontypes import JsonObject

SYSTEM = (
    "You are a software engineering agent working in a repository checked out at /repo. "
    "Use the tools to inspect files, edit them and run the tests. Think before each call; "
    "call one tool at a time; when the tests pass, answer with a summary of the change."
)
TOOLS = ("bash", "str_replace_editor")
WORDS = (
    "def return self value config parse index token cache request server buffer stream record "
    "field error check length offset block prefix client header result assert import module "
    "class test case path file line count limit read write open close format reply event"
).split()
BASE = dt.datetime(2026, 3, 2, 9, 0, 0, tzinfo=dt.timezone.utc)


def _code(rng: np.random.Generator, lines: int) -> str:
    out = []
    for n in range(lines):
        words = rng.choice(WORDS, size=int(rng.integers(4, 10)))
        out.append(f"{n + 1:4d}  " + " ".join(str(w) for w in words))
    return "\n".join(out)


def _steps(rng: np.random.Generator, task: int, count: int, tag: str) -> list[JsonObject]:
    """count tool steps: (thought, tool, arguments, result, think_s, tool_s)."""
    steps = []
    for k in range(count):
        tool = TOOLS[int(rng.integers(len(TOOLS)))]
        path = f"src/pkg{task}/mod{int(rng.integers(1, 9))}.py"
        args: dict[str, object]
        if tool == "bash":
            args = {"command": f"grep -n {WORDS[int(rng.integers(len(WORDS)))]} {path} | head -40"}
        else:
            args = {"command": "view", "path": f"/repo/{path}", "view_range": [1, 30 + 10 * k]}
        steps.append(
            {
                "id": f"call_{tag}_{k}",
                "thought": f"Step {k + 1} of {tag}: look at {path} for the {WORDS[int(rng.integers(len(WORDS)))]} handling.",
                "tool": tool,
                "args": args,
                "result": _code(rng, int(rng.integers(12, 40))),
                "think_s": round(float(rng.uniform(0.4, 1.5)), 3),
                "tool_s": round(float(rng.uniform(0.2, 2.0)), 3),
            }
        )
    return steps


def _tool_call(step: JsonObject) -> JsonObject:
    arguments = json.dumps(step["args"], sort_keys=True)
    return {"id": step["id"], "type": "function", "function": {"name": step["tool"], "arguments": arguments}}


def _agent_messages(
    history: list[JsonObject], steps: list[JsonObject], answer: str, t: float
) -> tuple[list[JsonObject], float]:
    """The messages of an agent that runs `steps` from `history`, with timestamps (s)."""
    messages = list(history)
    for step in steps:
        t += step["think_s"]
        messages.append(
            {
                "role": "assistant",
                "content": step["thought"],
                "tool_calls": [_tool_call(step)],
                "timestamp": round(t, 3),
            }
        )
        t += step["tool_s"]
        messages.append(
            {"role": "tool", "tool_call_id": step["id"], "content": step["result"], "timestamp": round(t, 3)}
        )
    t += 0.6
    messages.append({"role": "assistant", "content": answer, "timestamp": round(t, 3)})
    return messages, t


def sessions(seed: int = 53, count: int = 4) -> list[list[JsonObject]]:
    """Trajectories as {session, agent, parent, messages} rows; session 1 forks two sub-agents
    after its second step and resumes with their answers."""
    rng = np.random.default_rng(seed)
    rows: list[list[JsonObject]] = []
    start = 0.0
    for task in range(count):
        t = start
        issue = f"Issue {task + 1}: the parser in src/pkg{task} drops the last {WORDS[task]} of a stream.\n" + _code(
            rng, 12
        )
        history = [
            {"role": "system", "content": SYSTEM, "timestamp": round(t, 3)},
            {"role": "user", "content": issue, "timestamp": round(t, 3)},
        ]
        agents = []
        if task == 1:
            head, t = _agent_messages(history, _steps(rng, task, 2, f"t{task}"), "", t)
            head = head[:-1]  # no answer yet: the sub-agents go first
            results = []
            children_end = t
            for sub in range(2):
                ask = {
                    "role": "user",
                    "content": f"Sub-task {sub + 1}: find every caller of mod{sub + 1}.",
                    "timestamp": t,
                }
                child, end = _agent_messages(
                    [*head, ask], _steps(rng, task, 2, f"t{task}s{sub}"), f"mod{sub + 1} has 3 callers.", t
                )
                agents.append({"agent": f"sub{sub + 1}", "parent": "main", "messages": child, "fork": len(head)})
                results.append(child[-1]["content"])
                children_end = max(children_end, end)
            resume = {
                "role": "user",
                "content": "Sub-agents report: " + " ".join(results),
                "timestamp": round(children_end, 3),
            }
            main, t = _agent_messages(
                [*head, resume], _steps(rng, task, 2, f"t{task}m"), "Fixed; tests pass.", children_end
            )
            agents.insert(0, {"agent": "main", "parent": None, "messages": main})
        else:
            main, t = _agent_messages(
                history, _steps(rng, task, int(rng.integers(3, 5)), f"t{task}"), "Fixed; tests pass.", t
            )
            agents.append({"agent": "main", "parent": None, "messages": main})
        rows.append([{"session": f"task{task + 1}", **a} for a in agents])
        start += float(rng.uniform(1.0, 3.0))
    return rows


def messages_text(rows: list[list[JsonObject]]) -> str:
    """The messages format: one trajectory (an agent's messages) a line."""
    lines = []
    for agents in rows:
        for a in agents:
            row = {"session": a["session"], "agent": a["agent"], "messages": a["messages"]}
            if a["parent"]:
                row["parent"] = a["parent"]
            lines.append(json.dumps(row, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def _iso(t: float) -> str:
    return (BASE + dt.timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "")


def openhands_text(rows: list[list[JsonObject]]) -> str:
    """OpenHands event streams (sessions without sub-agents; OpenHands has none): one a line."""
    lines = []
    for agents in rows:
        if len(agents) > 1:
            continue
        events: list[JsonObject] = []
        for m in agents[0]["messages"]:
            when = _iso(m["timestamp"])
            n = len(events)
            if m["role"] == "system":
                events.append(
                    {
                        "id": n,
                        "timestamp": when,
                        "source": "agent",
                        "action": "system",
                        "args": {"content": m["content"]},
                    }
                )
            elif m["role"] == "user":
                events.append(
                    {
                        "id": n,
                        "timestamp": when,
                        "source": "user",
                        "action": "message",
                        "args": {"content": m["content"]},
                    }
                )
            elif m["role"] == "assistant" and m.get("tool_calls"):
                call = m["tool_calls"][0]
                args = {**json.loads(call["function"]["arguments"]), "thought": m["content"]}
                meta = {"function_name": call["function"]["name"], "tool_call_id": call["id"]}
                action = "run" if call["function"]["name"] == "bash" else "read"
                events.append(
                    {
                        "id": n,
                        "timestamp": when,
                        "source": "agent",
                        "action": action,
                        "args": args,
                        "tool_call_metadata": meta,
                    }
                )
            elif m["role"] == "tool":
                meta = {"function_name": "tool", "tool_call_id": m["tool_call_id"]}
                events.append(
                    {
                        "id": n,
                        "timestamp": when,
                        "source": "environment",
                        "observation": "run",
                        "content": m["content"],
                        "tool_call_metadata": meta,
                    }
                )
            else:
                events.append(
                    {
                        "id": n,
                        "timestamp": when,
                        "source": "agent",
                        "action": "finish",
                        "args": {"final_thought": m["content"]},
                    }
                )
        lines.append(json.dumps(events, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def otel_text(rows: list[list[JsonObject]]) -> str:
    """OTLP JSON: an invoke_agent span per agent (a sub-agent's under its parent's) and a chat
    span per model call with the GenAI conventions' input messages and output tokens."""
    spans: list[JsonObject] = []
    for s, agents in enumerate(rows):
        trace_id = f"{s + 1:032x}"
        agent_span: dict[str, str] = {}
        for a in agents:
            span_id = f"a{s:03x}{len(spans):012x}"
            agent_span[a["agent"]] = span_id
            parent = agent_span.get(a["parent"]) if a["parent"] else None
            spans.append(
                _span(
                    trace_id,
                    span_id,
                    parent,
                    "invoke_agent",
                    a["messages"][0]["timestamp"],
                    a["messages"][-1]["timestamp"],
                    {"gen_ai.agent.id": f"{a['session']}/{a['agent']}"},
                )
            )
            messages = a["messages"]
            for i, m in enumerate(messages):
                if m["role"] != "assistant" or i <= a.get("fork", 0):  # a sub-agent's own calls only
                    continue
                attrs = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.conversation.id": a["session"],
                    "gen_ai.input.messages": json.dumps(
                        [_otel_message(x) for x in messages[:i]], separators=(",", ":")
                    ),
                    "gen_ai.usage.output_tokens": 12 + 9 * len(m.get("tool_calls") or []) + len(m["content"]) // 5,
                }
                spans.append(
                    _span(
                        trace_id,
                        f"c{s:03x}{len(spans):012x}",
                        span_id,
                        "chat",
                        messages[i - 1]["timestamp"],
                        m["timestamp"],
                        attrs,
                    )
                )
    return (
        json.dumps(
            {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "benchy-sample"}, "spans": spans}]}]}, indent=1
        )
        + "\n"
    )


def _span(
    trace: str, span: str, parent: str | None, name: str, start: float, end: float, attrs: JsonObject
) -> JsonObject:
    out: dict[str, object] = {"traceId": trace, "spanId": span, "name": name}
    if parent:
        out["parentSpanId"] = parent
    nanos = int(BASE.timestamp() * 1e9)
    out["startTimeUnixNano"] = str(nanos + round(start * 1e9))
    out["endTimeUnixNano"] = str(nanos + round(end * 1e9))
    out["attributes"] = [
        {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
        for k, v in attrs.items()
    ]
    return out


def _otel_message(m: JsonObject) -> JsonObject:
    if m["role"] == "tool":
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]}],
        }
    parts: list[JsonObject] = [{"type": "text", "content": m["content"]}] if m.get("content") else []
    for call in m.get("tool_calls") or []:
        function = call["function"]
        parts.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": function["name"],
                "arguments": json.loads(function["arguments"]),
            }
        )
    return {"role": m["role"], "parts": parts}


def generate_samples() -> dict[str, str]:
    """file name (under benchy/data) → its text."""
    rows = sessions()
    return {
        "agent_sample_messages.jsonl": messages_text(rows),
        "agent_sample_openhands.json": openhands_text(rows),
        "agent_sample_otel.json": otel_text(rows),
    }


if __name__ == "__main__":
    data = Path(__file__).resolve().parent.parent / "data"
    for file_name, text in generate_samples().items():
        (data / file_name).write_text(text, encoding="utf-8")
