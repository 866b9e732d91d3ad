"""Agent trajectories: the model calls of agent sessions, read from the formats agents export.

An agent's every call resends its whole history (system prompt, task, its own earlier answers
with their tool calls, the tools' results), so what a prefix cache can hold is the history the
call shares with the calls before it. Here a trajectory becomes a list of `AgentCall`s: the
messages each call sent, in the trajectory's own text, the length of the answer it got, the
trace time it was made and answered, and which agent made it (a sub-agent's parent). The
replay (load/agent_replay.py) sends those messages, so what the trace shares is byte-identical
and what it does not share differs.

Formats, detected by content (any of them as a .json file or JSON Lines):
  messages    OpenAI chat messages per trajectory, as SWE-smith and most SFT exports write them:
              {"messages": [{"role": "system"|"user"|"assistant"|"tool", ...}, ...]} a line;
              each assistant message is a call's answer, the messages before it its prompt.
              Optional benchy keys: "session", "agent", "parent" (a sub-agent of that agent in
              the same session) and a "timestamp" (seconds) on messages
  openhands   an OpenHands event stream (a JSON list of events, or one list a line): events
              with "source" (user / agent / environment) and "action" or "observation"; an
              agent action is a call's answer (its tool call from tool_call_metadata), an
              observation with tool_call_metadata its tool's result; ISO timestamps
  otel        OpenTelemetry spans (OTLP JSON: resourceSpans → scopeSpans → spans) with the GenAI
              conventions: a span with gen_ai.input.messages is a call; gen_ai.conversation.id
              (else the trace id) its session; gen_ai.agent.id (on it or an ancestor span) its
              agent, the nearest ancestor of another agent its parent; start and end times;
              gen_ai.usage.output_tokens its answer

benchy ships a small sample of each (benchy/data/agent_sample_*.json*, `--trace agent-sample`
and its siblings), generated here (generate_samples) so nothing is downloaded.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchy.jsontypes import JsonObject
from benchy.workloads.spec import WorkloadError

if TYPE_CHECKING:
    from importlib.abc import Traversable

SAMPLES = {
    "agent-sample": "data/agent_sample_messages.jsonl",
    "agent-sample-openhands": "data/agent_sample_openhands.json",
    "agent-sample-otel": "data/agent_sample_otel.json",
}
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class AgentCall:
    """One model call of an agent: what it sent and what it got, as the trajectory says."""

    session: int  # the task (a trajectory with its sub-agents)
    agent: int  # the agent's index over the whole trace; a session's root agent comes first
    parent: int | None  # the agent that forked this one (None: a session's root)
    messages: list[JsonObject]  # the prompt, in the trajectory's own text
    output_tokens: int | None  # the answer's length where the trace states it (usage), else None
    start_s: float | None = None  # trace time of the call (None: the trace has no clock)
    end_s: float | None = None  # trace time its answer was complete
    after: list[int] = field(default_factory=list)  # calls (indices) that must end before it is sent
    gap_s: float = 0.0  # idle in the trace between the last of `after` ending and this call
    answer: JsonObject | None = None  # the answer's message, counted by the load stage without usage


@dataclass(eq=False)  # one read of a file: its identity is its key (load/agent_lengths.py)
class AgentTrace:
    format: str
    calls: list[AgentCall]

    @property
    def sessions(self) -> int:
        return len({c.session for c in self.calls})

    @property
    def agents(self) -> int:
        return len({c.agent for c in self.calls})


def sample_path(name: str) -> Path | None:
    """The shipped sample a name stands for, else None."""
    if name in SAMPLES:
        return Path(str(resources.files("benchy").joinpath(SAMPLES[name])))
    return None


def read_text(name: str) -> str:
    return read_path(name, sample_path(name) or Path(name))


def read_path(name: str, path: Path | Traversable) -> str:
    """A trace file's text (any format: workloads/trace.py reads its own through this too);
    a one-line WorkloadError naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"trace file not found: {name}") from None
    except IsADirectoryError:
        raise WorkloadError(f"trace {name} is a directory, not a trace file") from None
    except OSError as exc:
        raise WorkloadError(f"trace {name}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"trace {name}: not UTF-8 text (byte {exc.start})") from None


def detect(text: str) -> str | None:
    """The agent format of a trace's text, or None (a request trace: workloads/trace.py)."""
    first = _first_value(text)
    if isinstance(first, dict) and isinstance(first.get("messages"), list):
        return "messages"
    if isinstance(first, dict) and ("resourceSpans" in first or "resource_spans" in first):
        return "otel"
    events = first if isinstance(first, list) else [first]
    if events and all(isinstance(e, dict) for e in events) and any(_is_openhands(e) for e in events):  # type: ignore[arg-type]
        return "openhands"
    return None


def is_agent_trace(name: str) -> bool:
    if name in SAMPLES:
        return True
    try:
        return detect(read_text(name)) is not None
    except WorkloadError:
        return False


def load(name: str) -> AgentTrace:
    """The trace's calls in the order they were made, each with what it waits for; one-line
    errors naming the file and what is wrong. Read once per file version: a run asks for its
    calls several times (their count, the context check, the replay), and 10,000 sessions
    take seconds to read. The calls are shared: nobody changes them."""
    path = sample_path(name) or Path(name)
    try:
        stat = path.stat()
    except OSError:
        return _load(name, None)
    return _load(name, (stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _load(name: str, version: tuple[int, int] | None) -> AgentTrace:
    text = read_text(name)
    kind = detect(text)
    if kind is None:
        raise WorkloadError(f"trace {name}: not an agent trace (messages, OpenHands events or OTel spans)")
    values = _values(name, text)
    reader = {"messages": _from_messages, "openhands": _from_openhands, "otel": _from_otel}[kind]
    calls = reader(name, values)
    if not calls:
        raise WorkloadError(f"trace {name}: no model call (an assistant message after a prompt) in it")
    _order(calls)
    return AgentTrace(kind, calls)


# ------------------------------------------------------------------ JSON or JSON Lines


def _first_value(text: str) -> object:
    stripped = text.lstrip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        line = next((x for x in stripped.splitlines() if x.strip()), "")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return None


def _values(name: str, text: str) -> list[Any]:
    """A whole-file JSON value (a list's items, or the one object), else one value a line."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise WorkloadError(f"trace {name}:{number}: not JSON ({exc.msg})") from None
        return out
    return [whole]


# ------------------------------------------------------------------ messages (SWE-smith, SFT exports)


def _from_messages(name: str, values: list[Any]) -> list[AgentCall]:
    rows = [v for value in values for v in (value if isinstance(value, list) else [value])]
    sessions: dict[object, int] = {}
    agents: dict[tuple[int, object], int] = {}
    sent: dict[int, list[JsonObject]] = {}  # agent → its messages (a sub-agent repeats its parent's history)
    calls: list[AgentCall] = []
    for number, row in enumerate(rows, 1):
        where = f"trace {name}: trajectory {number}"
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            raise WorkloadError(f"{where}: expected an object with a list of messages")
        messages = [_chat_message(where, m) for m in row["messages"]]
        session = sessions.setdefault(row.get("session", f"#{number}"), len(sessions))
        parent_key = row.get("parent")
        parent = agents.get((session, parent_key)) if parent_key is not None else None
        if parent_key is not None and parent is None:
            raise WorkloadError(f"{where}: parent {parent_key!r} is no earlier agent of its session")
        agent = agents.setdefault((session, row.get("agent", f"#{number}")), len(agents))
        times = [m.pop("timestamp", None) for m in messages]
        inherited = _common(messages, sent.get(parent, [])) if parent is not None else 0
        sent[agent] = messages
        for i, message in enumerate(messages):
            if message["role"] == "assistant" and i >= max(1, inherited):  # a sub-agent's own calls only
                start, end = times[i - 1], times[i]
                calls.append(
                    AgentCall(session, agent, parent, messages[:i], None, _secs(start), _secs(end), answer=message)
                )
    return calls


def _common(a: list[JsonObject], b: list[JsonObject]) -> int:
    """How many leading messages two lists share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _chat_message(where: str, message: object) -> JsonObject:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise WorkloadError(f"{where}: a message needs a role of {', '.join(ROLES)}, got {message!r:.80}")
    keep = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "timestamp")
    out = {k: message[k] for k in keep if k in message}
    out.setdefault("content", "" if not out.get("tool_calls") else None)
    return out


def _secs(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def message_text(message: JsonObject) -> str:
    """The words of a message: content (string or parts), reasoning, tool calls."""
    parts = [content_text(message.get("content")), str(message.get("reasoning_content") or "")]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {} if isinstance(call, dict) else {}
        parts += [str(function.get("name") or ""), str(function.get("arguments") or "")]
    return " ".join(p for p in parts if p)


def content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


# ------------------------------------------------------------------ OpenHands events


def _is_openhands(event: JsonObject) -> bool:
    return event.get("source") in ("agent", "user", "environment") and ("action" in event or "observation" in event)


def _from_openhands(name: str, values: list[Any]) -> list[AgentCall]:
    streams = [v for v in values if isinstance(v, list)] if any(isinstance(v, list) for v in values) else [values]
    calls: list[AgentCall] = []
    for session, events in enumerate(streams):
        messages: list[JsonObject] = []
        last_time: float | None = None
        for number, event in enumerate(events, 1):
            if not isinstance(event, dict) or not _is_openhands(event):
                raise WorkloadError(f"trace {name}: event {number} of trajectory {session + 1} is no OpenHands event")
            when = _iso_s(event.get("timestamp"))
            message = _openhands_message(event)
            if message is None:
                continue
            if message["role"] == "assistant" and messages:
                calls.append(AgentCall(session, session, None, list(messages), None, last_time, when, answer=message))
            messages.append(message)
            last_time = when
    return calls


def _openhands_message(event: JsonObject) -> JsonObject | None:
    """The chat message an OpenHands event stands for (None: one the model never sees)."""
    args: JsonObject = event["args"] if isinstance(event.get("args"), dict) else {}
    meta: JsonObject | None = event["tool_call_metadata"] if isinstance(event.get("tool_call_metadata"), dict) else None
    if "observation" in event:
        if meta is None:
            return None
        return {"role": "tool", "tool_call_id": str(meta.get("tool_call_id")), "content": str(event.get("content", ""))}
    action = event.get("action")
    if action == "system":
        return {"role": "system", "content": str(args.get("content", ""))}
    if event.get("source") == "user":
        return {"role": "user", "content": str(args.get("content", event.get("message", "")))}
    if meta is not None:
        arguments = {k: v for k, v in args.items() if k != "thought"}  # the thought is the message's text
        call = {
            "id": str(meta.get("tool_call_id")),
            "type": "function",
            "function": {"name": str(meta.get("function_name")), "arguments": json.dumps(arguments, sort_keys=True)},
        }
        return {"role": "assistant", "content": str(args.get("thought", "")), "tool_calls": [call]}
    if action in ("message", "finish"):
        return {"role": "assistant", "content": str(args.get("content", args.get("final_thought", "")))}
    return None


def _iso_s(value: object) -> float | None:
    if not isinstance(value, str):
        return _secs(value)
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


# ------------------------------------------------------------------ OpenTelemetry GenAI spans


def _from_otel(name: str, values: list[Any]) -> list[AgentCall]:
    spans = list(_otel_spans(values))
    by_id: dict[object, JsonObject] = {s.get("spanId"): s for s in spans}
    sessions: dict[object, int] = {}
    agents: dict[tuple[int, object], int] = {}
    calls: list[AgentCall] = []
    for span in sorted(spans, key=lambda s: int(s.get("startTimeUnixNano", 0))):
        attrs = _attributes(span)
        given = attrs.get("gen_ai.input.messages")
        if given is None:
            continue
        where = f"trace {name}: span {span.get('spanId')}"
        messages = _otel_messages(where, given)
        session = sessions.setdefault(attrs.get("gen_ai.conversation.id", span.get("traceId")), len(sessions))
        chain = _agent_chain(span, by_id)
        agent_key = chain[0] if chain else "root"
        parent = agents.get((session, chain[1])) if len(chain) > 1 else None
        agent = agents.setdefault((session, agent_key), len(agents))
        output = attrs.get("gen_ai.usage.output_tokens")
        answer = None
        if not isinstance(output, int) or output < 1:
            answers = _otel_messages(where, attrs.get("gen_ai.output.messages", "[]"))
            output, answer = (None, answers[0]) if answers else (1, None)
        start, end = int(span.get("startTimeUnixNano", 0)) / 1e9, int(span.get("endTimeUnixNano", 0)) / 1e9
        calls.append(AgentCall(session, agent, parent, messages, output, start, end or None, answer=answer))
    return calls


def _otel_spans(values: list[Any]) -> Iterator[JsonObject]:
    for value in values:
        resources_ = value.get("resourceSpans", value.get("resource_spans", [])) if isinstance(value, dict) else []
        for resource in resources_ or []:
            for scope in resource.get("scopeSpans", resource.get("scope_spans", [])):
                yield from (s for s in scope.get("spans", []) if isinstance(s, dict))


def _attributes(span: JsonObject) -> JsonObject:
    out = {}
    for item in span.get("attributes", []):
        value = item.get("value", {}) if isinstance(item, dict) else {}
        for kind in ("stringValue", "intValue", "doubleValue", "boolValue"):
            if kind in value:
                out[item.get("key")] = int(value[kind]) if kind == "intValue" else value[kind]
    return out


def _agent_chain(span: JsonObject, by_id: dict[object, JsonObject]) -> list[object]:
    """The agents from this span up: its own (or its nearest ancestor's) gen_ai.agent.id first."""
    chain: list[object] = []
    seen = set()
    node: JsonObject | None = span
    while node is not None and node.get("spanId") not in seen:
        seen.add(node.get("spanId"))
        agent = _attributes(node).get("gen_ai.agent.id")
        if agent is not None and (not chain or chain[-1] != agent):
            chain.append(agent)
        node = by_id.get(node.get("parentSpanId"))
    return chain


def _otel_messages(where: str, given: object) -> list[JsonObject]:
    """GenAI semantic-convention messages (role + parts) as chat messages."""
    try:
        items = json.loads(given) if isinstance(given, str) else given
    except json.JSONDecodeError:
        raise WorkloadError(f"{where}: gen_ai.input.messages is not JSON") from None
    if not isinstance(items, list):
        raise WorkloadError(f"{where}: gen_ai.input.messages must be a list of messages")
    out: list[JsonObject] = []
    for item in items:
        if not isinstance(item, dict) or item.get("role") not in ROLES:
            raise WorkloadError(f"{where}: a message needs a role of {', '.join(ROLES)}")
        text, calls, results = [], [], []
        for part in item.get("parts", []):
            kind = part.get("type")
            if kind == "text":
                text.append(str(part.get("content", "")))
            elif kind == "tool_call":
                arguments = part.get("arguments")
                arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
                function = {"name": str(part.get("name")), "arguments": arguments}
                calls.append({"id": str(part.get("id")), "type": "function", "function": function})
            elif kind == "tool_call_response":
                response = part.get("response")
                results.append((str(part.get("id")), response if isinstance(response, str) else json.dumps(response)))
        if results:
            out += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in results]
            continue
        message: JsonObject = {"role": item["role"], "content": "".join(text) if text or not calls else None}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


# ------------------------------------------------------------------ order and dependencies


def _order(calls: list[AgentCall]) -> None:
    """Sorts the calls as they were made and says what each waits for: its agent's previous
    call; a sub-agent's first call, the parent's call before it; a parent's call, the last
    calls of the sub-agents it forked before it (it resumes with their results). Without a
    clock, a trajectory's own order stands and a sub-agent's fork is its parent's latest call."""
    clocked = all(c.start_s is not None for c in calls)
    if clocked:
        calls.sort(key=lambda c: c.start_s or 0.0)
        origin = calls[0].start_s or 0.0
        for c in calls:
            c.start_s = (c.start_s or 0.0) - origin
            c.end_s = c.end_s - origin if c.end_s is not None else None
    else:
        for c in calls:
            c.start_s = c.end_s = None
    last: dict[int, int] = {}  # agent → its latest call so far
    forked: dict[int, list[int]] = {}  # agent → sub-agents forked since its last call
    for i, c in enumerate(calls):
        if c.agent in last:
            c.after.append(last[c.agent])
        elif c.parent is not None and c.parent in last:
            c.after.append(last[c.parent])
            forked.setdefault(c.parent, []).append(c.agent)
        for child in forked.pop(c.agent, []) if c.agent in last else []:
            c.after.append(last[child])
        last[c.agent] = i
        ends = [calls[j].end_s for j in c.after]
        if c.start_s is not None and ends and all(e is not None for e in ends):
            c.gap_s = max(0.0, c.start_s - max(e for e in ends if e is not None))


# ------------------------------------------------------------------ a part of it


def limited(trace: AgentTrace, limit: int | None) -> AgentTrace:
    """The first `limit` calls (in the order they were made: none waits for a later one)."""
    return trace if limit is None else AgentTrace(trace.format, trace.calls[:limit])
