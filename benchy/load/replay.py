"""Trace replay: requests leave at a trace's own times with its own lengths and block reuse.

The trace is read by workloads/trace.py (formats, block ids, the reuse an ideal cache gives);
this module sends it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from benchy.load import arrivals
from benchy.load.agent_replay import replay_agents
from benchy.load.plan import CaseIO, CasePlan, PlannedRequest, planned, request_options, trace_spec
from benchy.load.prompts import PromptFactory
from benchy.load.send import Open, send
from benchy.records import RequestRecord
from benchy.workloads.agent_trace import is_agent_trace
from benchy.workloads.trace import BLOCK_TOKENS, TraceRequest, expected_reuse, load, shareable


async def replay(plan: CasePlan, case_io: CaseIO) -> None:
    """Every request at its trace time ÷ speed, with its own lengths, as an open loop, so a
    send held back by --max-inflight is measured as queue delay (as for a --rate case). No
    warmups: the trace says what comes first. An agent trace is sent by its own loop
    (load/agent_replay.py): each call waits for the answers its history holds."""
    if is_agent_trace(trace_spec(plan).path):
        await replay_agents(plan, case_io)
        return
    planned_requests = trace_requests(plan, load(trace_spec(plan).path, plan.trace_limit), case_io.prompts)
    start_s = await case_io.start() if case_io.start else time.perf_counter()
    deadline = arrivals.duration_deadline(start_s, plan.duration_s)
    pace = Open(start_s, plan.inflight_cap, deadline, plan.drain_window)
    await send(case_io.client, planned_requests, case_io.on_record, pace, on_sent=case_io.on_sent)


def trace_requests(plan: CasePlan, requests: list[TraceRequest], prompts: PromptFactory) -> Iterator[PlannedRequest]:
    """The trace's planned requests, each made as the send loop takes it (just ahead of its
    time: a long trace's prompts would not fit in memory at once), from block texts that need
    no tokenizing. The reuse of every request is worked out here, before the first is sent."""
    speed = trace_spec(plan).speed
    reuse, could_share = expected_reuse(requests), shareable(requests)
    template = max(0, round(prompts.calibration.overhead_tokens))
    bodies: dict[int, dict[str, Any]] = {}  # one body per output length, shared by its requests

    def made() -> Iterator[PlannedRequest]:
        for i, req in enumerate(requests):
            tags = prompts.calibration.tags(
                expected_cached_tokens=reuse[i],
                unique_tokens=max(0, req.input_tokens - could_share[i] - template),
                group=_family(req),
            )
            prompt = prompts.blocks(list(req.block_ids(i)), req.input_tokens, BLOCK_TOKENS)
            body = bodies.setdefault(req.output_tokens, request_options(plan, req.output_tokens))
            yield planned(plan, _record(plan, i, req), prompt, req.output_tokens, body, req.offset_s / speed, tags)

    return made()


def _record(plan: CasePlan, index: int, req: TraceRequest) -> RequestRecord:
    """The request's record before it is sent. Its tags (made beside it) expect the reuse of
    the trace's order, but its unique tokens are those no other request of the trace has
    (`shareable`): two requests due close together may reach the server swapped, and the
    earlier then finds the later's prefix, which is no leakage. They leave room for the chat
    template too (its head may be cached with the shared blocks behind it)."""
    return RequestRecord(
        case=plan.case.label,
        run=0,
        index=index,
        warmup=False,
        request_id=f"benchy-{plan.salt}-{plan.index}t{index}",
        nonce=None,
        target_prompt_tokens=req.input_tokens,
        target_output_tokens=req.output_tokens,
    )


def _family(req: TraceRequest) -> int | None:
    """The request's leading block id: requests that share it share a prefix, so the latest of
    them to end is what this one's idle time runs from (a cache lifetime: measure/workloads.py)."""
    first = req.hash_ids[0] if req.hash_ids else None
    return first if isinstance(first, int) else None
