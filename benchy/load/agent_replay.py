"""Agent trace replay: each call of an agent trajectory sent with the trajectory's own messages,
when what it waits for has ended and the trace's idle time after that has passed.

A session's first call leaves at its trace time ÷ speed; every other call waits for the calls
it depends on (its agent's previous call; a sub-agent's first call, its parent's fork; a
parent's resuming call, its sub-agents' last calls: agent_trace._order), then the trace's own
gap after them (tool time) ÷ speed, at most --max-gap. So the replay keeps the trace's clock
where the server keeps up, and never sends a call before the answer its history holds.

The messages are the trajectory's, led by the run's salt (one per run: sessions that share a
system prompt still share it byte for byte, and nothing is shared with another run), so what
the trace shares is identical and what it does not is not. Each record says what an ideal
cache serves it: the server's own prompt count of the longest earlier call whose messages are
a prefix of this one's (that call's prefill is cached), known once that call has ended; and
its unique tokens: a floor of those after the messages it shares with any call that can reach
the server before it (word_floor). A failed call is recorded and counted; the calls after it still go (their history is the
trace's, not the answer).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from dataclasses import replace

from benchy.jsontypes import JsonObject
from benchy.load.agent_lengths import answer_tokens
from benchy.load.plan import CaseIO, CasePlan, PlannedRequest, request_options, trace_spec
from benchy.load.prompts import PromptError
from benchy.load.send import Closed, send
from benchy.measure import tokenizer
from benchy.records import RequestRecord
from benchy.workloads import agent_trace
from benchy.workloads.agent_trace import AgentCall, AgentTrace

# A timer fires this long before a call is due, and its task sleeps out the rest: a loop's
# clock can be coarser than perf_counter (uvloop's is in ms), and a late timer is send lag.
TIMER_SLACK_S = 0.002
HISTORY_ENDPOINTS = ("chat", "responses", "messages")  # each sends a history with tool calls (client/history.py)


async def replay_agents(plan: CasePlan, case_io: CaseIO) -> None:
    """Every call of the trace, each as soon as it may go (see the module docstring)."""
    if plan.endpoint not in HISTORY_ENDPOINTS:
        raise PromptError("an agent trace replays messages with tool calls: use --endpoint chat, responses or messages")
    spec = trace_spec(plan)
    trace = agent_trace.limited(agent_trace.load(spec.path), plan.trace_limit)
    replay = AgentReplay(plan, case_io, trace, spec.speed, spec.max_gap_s)
    start_s = await case_io.start() if case_io.start else time.perf_counter()
    await replay.run(start_s)


class AgentReplay:
    """Sends an agent trace's calls (a file's, or the sub-agent conversations load/subagents.py
    makes), each when its dependencies have answered and its gap ÷ speed (≤ max_gap_s) passed."""

    def __init__(
        self, plan: CasePlan, case_io: CaseIO, trace: AgentTrace, speed: float = 1.0, max_gap_s: float | None = None
    ) -> None:
        self.plan, self.io, self.trace = plan, case_io, trace
        self.speed, self.max_gap_s = speed, max_gap_s
        self.keys = [_prefix_keys(c.messages) for c in trace.calls]
        self.unique = _unique_tokens(trace.calls, self.keys)
        self.rewrites = _rewrites(trace.calls, self.keys)
        self.turns = _turns(trace.calls)
        self.outputs = [answer_tokens(c) for c in trace.calls]  # counted before the first send
        self.end_at: list[float] = [0.0] * len(trace.calls)
        self.waiting = [len(c.after) for c in trace.calls]  # dependencies not yet ended
        self.dependents: list[list[int]] = [[] for _ in trace.calls]
        for i, c in enumerate(trace.calls):
            for j in c.after:
                self.dependents[j].append(i)
        self.remaining = len(trace.calls)
        self.all_done = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.timers: dict[int, asyncio.TimerHandle] = {}  # calls due later: a timer each, no task yet
        self._fire_cb, self._context = self._fire, contextvars.copy_context()  # one of each for every timer
        self.failure: list[BaseException] = []
        self.start_s = 0.0
        self.served: dict[int, int] = {}  # a finished call's message key → the server's prompt count
        self.bodies: dict[int, JsonObject] = {}

    async def run(self, start_s: float) -> None:
        """The calls that wait for nothing at their offsets, in time order; every other call is
        started (its task made) only once its last dependency ends, so an idle session holds
        one sleeping task at most, not one a call (the memory of 10,000 sessions)."""
        self.start_s = start_s
        roots = sorted(_session_starts(self.trace.calls, self.speed, self.max_gap_s).items(), key=lambda kv: kv[1])
        try:
            for i, offset in roots:
                due = start_s + offset
                while (delay := due - time.perf_counter()) > 0:  # a timer may fire early (client/loop.py)
                    await asyncio.sleep(delay)
                if self.failure:
                    break
                self._spawn(i, due)
            if self.remaining and not self.failure:
                await self.all_done.wait()
            if self.failure:
                raise self.failure[0]
        finally:
            for timer in self.timers.values():
                timer.cancel()
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)

    def _due(self, i: int, due: float) -> None:
        """Call i at `due` (perf_counter s): a timer until shortly before, its task only then.
        A sleeping task costs a session about fifteen objects (task, coroutine, future, timer,
        contexts) that every collection of the young generations walks while it waits out
        seconds of tool time; a timer is two (its handle and uvloop's), sharing one bound method and
        one context with every other (docs/agents.md, Scale)."""
        loop = asyncio.get_running_loop()
        wait = due - time.perf_counter() - TIMER_SLACK_S
        if wait <= 0:
            self._spawn(i, due)
            return
        self.timers[i] = loop.call_at(loop.time() + wait, self._fire_cb, i, due, context=self._context)

    def _fire(self, i: int, due: float) -> None:
        del self.timers[i]
        if not self.failure:
            self._spawn(i, due)

    def _spawn(self, i: int, due: float) -> None:
        task = asyncio.ensure_future(self._call(i, due))
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.failure.append(exc)  # a send that failed (never a failed request) ends the replay
            self.all_done.set()

    async def _call(self, i: int, due: float) -> None:
        try:
            while (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            if self.plan.duration_s is None or time.perf_counter() < self.start_s + self.plan.duration_s:
                request = self._planned(i)
                request.tags = replace(request.tags, scheduled_mono_s=due)
                await send(
                    self.io.client, [request], lambda rec: self._recorded(i, rec), Closed(1), on_sent=self.io.on_sent
                )
        finally:
            self._ended(i)

    def _recorded(self, i: int, rec: RequestRecord) -> None:
        if rec.ok and rec.prompt_tokens:
            self.served[self.keys[i][-1]] = rec.prompt_tokens
        self.end_at[i] = time.perf_counter()
        self.io.on_record(rec)

    def _ended(self, i: int) -> None:
        """Call i is over (answered, failed, or not sent past --duration): each call that waited
        for it and for nothing else now is due its gap ÷ speed (≤ max_gap_s) after the last."""
        self.end_at[i] = self.end_at[i] or time.perf_counter()
        self.remaining -= 1
        for d in self.dependents[i]:
            self.waiting[d] -= 1
            if self.waiting[d] == 0 and not self.failure:
                call = self.trace.calls[d]
                gap = call.gap_s / self.speed
                gap = min(gap, self.max_gap_s) if self.max_gap_s is not None else gap
                self._due(d, max(self.end_at[j] for j in call.after) + gap)
        if not self.remaining:
            self.all_done.set()

    def _planned(self, i: int) -> PlannedRequest:
        call = self.trace.calls[i]
        rec = RequestRecord(
            case=self.plan.case.label,
            run=0,
            index=i,
            warmup=False,
            request_id=f"benchy-{self.plan.salt}-{self.plan.index}a{call.agent}t{self.turns[i]}",
            nonce=self.plan.salt,
            target_prompt_tokens=0,  # the trajectory's own messages: no length is asked
            target_output_tokens=self.outputs[i],
        )
        tags = self.io.prompts.calibration.tags(
            conversation=call.agent,
            turn=self.turns[i],
            group=call.session,
            expected_cached_tokens=self._expected(i),
            unique_tokens=self.unique[i],
            history_reasoning=self.rewrites[i],
        )
        tokens = self.outputs[i]
        body = self.bodies.setdefault(tokens, request_options(self.plan, tokens))
        messages = salted(call.messages, self.plan.salt)
        return PlannedRequest(rec, "", tokens, self.plan.endpoint, {**body, "messages": messages}, tags=tags)

    def _expected(self, i: int) -> int:
        """The server's prompt count of the longest finished call whose messages lead this
        one's (0: none has; its system prompt alone shared with another session is not counted:
        benchy cannot tell where the template puts it in tokens)."""
        for key in reversed(self.keys[i][:-1]):
            if key in self.served:
                return self.served[key]
        return 0


def _rewrites(calls: list[AgentCall], keys: list[list[int]]) -> list[bool]:
    """Per call: whether a template that renders only the last turn's reasoning rewrites the
    history it extends: an assistant message with reasoning that the extended call (the
    longest other call whose messages lead this one's) had after its last user message, now
    before this call's last user message."""
    whole = {ks[-1]: i for i, ks in enumerate(keys)}
    out = []
    for i, ks in enumerate(keys):
        j = next((whole[k] for k in reversed(ks[:-1]) if k in whole), None)
        if j is None:
            out.append(False)
            continue
        was, now = _last_user(calls[j].messages), _last_user(calls[i].messages)
        span = calls[i].messages[was + 1 : min(len(calls[j].messages), now)]
        out.append(any(m.get("role") == "assistant" and m.get("reasoning_content") for m in span))
    return out


def _last_user(messages: list[JsonObject]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)


def salted(messages: list[JsonObject], salt: str) -> list[JsonObject]:
    """The messages with the run's salt leading the first one's text."""
    first = dict(messages[0])
    content = first.get("content")
    if isinstance(content, list):
        first["content"] = [{"type": "text", "text": f"[{salt}] "}, *content]
    else:
        first["content"] = f"[{salt}] {content or ''}"
    return [first, *messages[1:]]


def _prefix_keys(messages: list[JsonObject]) -> list[int]:
    """A key per leading run of messages (1, 2, … all of them): equal keys, equal messages."""
    keys: list[int] = []
    running = 0
    for m in messages:
        running = hash((running, json.dumps(m, sort_keys=True)))
        keys.append(running)
    return keys


def _unique_tokens(calls: list[AgentCall], keys: list[list[int]]) -> list[int]:
    """Each call's tokens after the leading messages it shares with any call that can reach
    the server before it (one that does not wait for it, directly or not), as a floor: its
    runs of letters and of digits, each at least one token in any vocabulary (a count above
    prompt − unique is then leakage whatever the tokenizer and template)."""
    ancestors = _ancestors(calls)
    holders: dict[int, list[int]] = {}
    for i, ks in enumerate(keys):
        for k in ks:
            holders.setdefault(k, []).append(i)
    out = []
    for i, ks in enumerate(keys):
        shared = 0
        for n, k in enumerate(ks, 1):
            if any(j != i and i not in ancestors[j] for j in holders[k]):
                shared = n
        out.append(word_floor(calls[i].messages[shared:]))
    return out


def _ancestors(calls: list[AgentCall]) -> list[set[int]]:
    """The calls each one waits for, directly or not (`after` names only earlier calls)."""
    out: list[set[int]] = []
    for c in calls:
        mine: set[int] = set()
        for j in c.after:
            mine |= out[j] | {j}
        out.append(mine)
    return out


def word_floor(messages: list[JsonObject]) -> int:
    """The messages' content's tokens.floor: fewer tokens than this no tokenizer gives them.
    Only the content counts: a template may leave out reasoning (gpt-oss's, or earlier turns'
    in Qwen3's) and tool calls (a template without tool support)."""
    return sum(tokenizer.floor(agent_trace.content_text(m.get("content"))) for m in messages)


def _turns(calls: list[AgentCall]) -> list[int]:
    """Each call's number within its agent, from 1."""
    seen: dict[int, int] = {}
    out = []
    for c in calls:
        seen[c.agent] = seen.get(c.agent, 0) + 1
        out.append(seen[c.agent])
    return out


def _session_starts(calls: list[AgentCall], speed: float, max_gap_s: float | None) -> dict[int, float]:
    """Send offsets (s) of the calls that wait for nothing: their trace times ÷ speed, each gap
    between two of them capped at max_gap_s."""
    firsts = [(i, (c.start_s or 0.0) / speed) for i, c in enumerate(calls) if not c.after]
    out, previous, at = {}, 0.0, 0.0
    for i, t in firsts:
        gap = t - previous
        at += min(gap, max_gap_s) if max_gap_s is not None else gap
        out[i], previous = at, t
    return out
