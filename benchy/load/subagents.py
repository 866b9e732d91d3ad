"""Sub-agents (`--turns T --subagents N`): conversations whose every turn but the last forks N
child agents that share the conversation's history, run at once, and whose results the next
turn resumes with, as a coding agent's planner hands work to explorers.

Each of the -c conversations is an agent trajectory made here, before anything is sent, and
replayed by load/agent_replay.py like a trace file's:
  turn 1      the main agent's call: a user message of --first-tokens (else --pp) tokens
  fork        its answer (--tg tokens of text, and a `subagent` tool call per child); child k
              sends the main history, that answer and a task of --pp tokens: one call each,
              all N at once, as soon as the turn has answered
  turn t > 1  once every child has answered and a --think-time pause has passed: the history,
              the children's answers as tool results and a user message of --pp tokens
Every message is led by its own nonce (PromptFactory), so what the agents share is exactly
the history and nothing else. The history carries the trajectory's own answers (benchy's
words, --tg tokens long), not the server's: a replay, so each call's prompt is known before it
is sent and the children's shared prefix is byte-identical whatever the server answered.
"""

from __future__ import annotations

import itertools
import json
import time

from benchy.jsontypes import JsonObject
from benchy.load.agent_replay import HISTORY_ENDPOINTS, AgentReplay
from benchy.load.conversations import warmup_requests
from benchy.load.plan import CaseIO, CasePlan, multi_turn_spec, request_options
from benchy.load.prompts import PromptError, PromptFactory
from benchy.load.send import Closed, send
from benchy.workloads.agent_trace import AgentCall, AgentTrace


async def run_subagents(plan: CasePlan, case_io: CaseIO) -> None:
    if plan.endpoint not in HISTORY_ENDPOINTS:
        raise PromptError(
            "--subagents sends tool calls and results as history: use --endpoint chat, responses or messages"
        )
    trace = conversations(plan, case_io.prompts)
    warmups = warmup_requests(plan, case_io.prompts, request_options(plan, plan.case.tg))
    await send(case_io.client, warmups, case_io.on_record, Closed(1), on_sent=case_io.on_sent)
    start_s = await case_io.start() if case_io.start else time.perf_counter()
    await AgentReplay(plan, case_io, trace).run(start_s)


def conversations(plan: CasePlan, prompts: PromptFactory) -> AgentTrace:
    """The case's conversations as agent calls (see the module docstring)."""
    spec = multi_turn_spec(plan)
    agents = itertools.count()
    calls: list[AgentCall] = []
    for u in range(plan.case.concurrency):
        pauses = spec.think.draws(plan.seed * 100_003 + plan.index * 1_009 + u)
        main = next(agents)
        first = spec.first_tokens or plan.case.pp
        history: list[JsonObject] = [{"role": "user", "content": prompts.message(first).text}]
        waits: list[int] = []
        gap = 0.0
        for turn in range(1, spec.turns + 1):
            calls.append(AgentCall(u, main, None, list(history), plan.case.tg, after=waits, gap_s=gap))
            own = len(calls) - 1
            if turn == spec.turns:
                break
            ids = [f"call_{u}_{turn}_{k}" for k in range(spec.subagents)]
            answer = {
                "role": "assistant",
                "content": _words(prompts, plan.case.tg),
                "tool_calls": [_spawn(i, k) for k, i in enumerate(ids)],
            }
            history.append(answer)
            waits, results = [own], []
            for call_id in ids:
                task = {"role": "user", "content": prompts.message(plan.case.pp).text}
                calls.append(AgentCall(u, next(agents), main, [*history, task], plan.case.tg, after=[own]))
                waits.append(len(calls) - 1)
                results.append({"role": "tool", "tool_call_id": call_id, "content": _words(prompts, plan.case.tg)})
            history += [*results, {"role": "user", "content": prompts.message(plan.case.pp).text}]
            gap = next(pauses)
    return AgentTrace("subagents", calls)


def _spawn(call_id: str, k: int) -> JsonObject:
    arguments = json.dumps({"agent": f"explorer-{k + 1}", "task": k + 1})
    return {"id": call_id, "type": "function", "function": {"name": "subagent", "arguments": arguments}}


def _words(prompts: PromptFactory, tokens: int) -> str:
    """An answer's text as the trajectory has it: nonce-led words of about `tokens` tokens."""
    return prompts.message(max(9, tokens)).text
