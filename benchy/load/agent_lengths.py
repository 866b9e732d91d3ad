"""An agent trace's lengths, counted here from the text the trajectory holds: each call's
answer (where the trace gives no usage) and its prompt's estimate. The workloads stage reads the
trajectories and counts nothing; counting is the load stage's (o200k, as every other plan's
estimate), which the context check, the warm-up lengths and the replay ask for.

A request trace (Mooncake, Azure, BurstGPT) states its lengths: `trace_requests` passes it
through as workloads/trace.py read it.
"""

from __future__ import annotations

import functools

from benchy.jsontypes import JsonObject
from benchy.measure import tokenizer
from benchy.workloads import agent_trace, trace
from benchy.workloads.agent_trace import AgentCall, AgentTrace
from benchy.workloads.trace import TraceRequest

MESSAGE_OVERHEAD = 8  # template tokens a message adds (role header, separators), for estimates only


def answer_tokens(call: AgentCall) -> int:
    """The call's answer length: the trace's usage, else the answer's text and tool calls
    counted locally (o200k), at least 1."""
    if call.output_tokens is not None:
        return call.output_tokens
    return max(1, tokenizer.count(agent_trace.message_text(call.answer or {})))


def local_tokens(messages: list[JsonObject]) -> int:
    """The messages' words counted locally (o200k), without any chat template."""
    return sum(tokenizer.count(agent_trace.message_text(m)) for m in messages)


def estimated_prompt(messages: list[JsonObject]) -> int:
    """A call's prompt length before anything is sent, for the context check and the plan's
    lint: its words counted locally plus a template's few tokens a message. Never a figure."""
    return local_tokens(messages) + MESSAGE_OVERHEAD * len(messages)


@functools.lru_cache(maxsize=4)
def _lengths(whole: AgentTrace) -> tuple[tuple[int, int], ...]:
    """(prompt estimate, answer) of every call, counted once per read trace (a run asks for
    them several times: the context check, the warm-up lengths, the plan)."""
    return tuple((estimated_prompt(c.messages), answer_tokens(c)) for c in whole.calls)


def trace_requests(name: str, limit: int | None = None) -> list[TraceRequest]:
    """The trace's requests in time order with their lengths: an agent trace's calls with
    their lengths counted here, a request trace's as it states them."""
    if not agent_trace.is_agent_trace(name):
        return trace.load(name, limit)
    whole = agent_trace.load(name)
    calls = agent_trace.limited(whole, limit).calls
    return [TraceRequest(c.start_s or 0.0, n, m, None) for c, (n, m) in zip(calls, _lengths(whole))]
