"""Trace replay: requests leave at a trace's own times with its own lengths and block reuse.

The trace is read by workloads/trace.py (formats, block ids, the reuse an ideal cache gives);
this module sends it.
"""

from __future__ import annotations

import time

from benchy.load import arrivals
from benchy.load.plan import CaseIO, CasePlan, Send, request_options, send_request, trace_spec
from benchy.measure.records import RequestRecord
from benchy.workloads.trace import BLOCK_TOKENS, TraceRequest, expected_reuse, load


async def replay(plan: CasePlan, case_io: CaseIO) -> None:
    """Every request at its trace time ÷ speed, with its own lengths; arrivals.open_loop does
    the sending, so a send held back by --max-inflight is measured as queue delay (as for a
    --rate case). Prompts are made as they are due (a long trace would not fit in memory),
    from block texts that need no tokenizing. No warmups: the trace says what comes first."""
    client, prompts, on_record, start = case_io.client, case_io.prompts, case_io.on_record, case_io.start
    spec = trace_spec(plan)
    requests = load(spec.path, plan.trace_limit)
    reuse = expected_reuse(requests)
    template = max(0, round(prompts.calibration.overhead))
    records = [_record(plan, i, req, reuse[i], template) for i, req in enumerate(requests)]
    start_s = await start() if start else time.perf_counter()
    deadline = arrivals.duration_deadline(start_s, plan.duration_s)
    items = [(req.offset_s / spec.speed, i) for i, req in enumerate(requests)]
    items = [(offset, i) for offset, i in items if start_s + offset < deadline]

    async def send(i: int, due: float) -> None:
        rec, req = records[i], requests[i]
        prompt = prompts.blocks(list(req.block_ids(i)), req.input_tokens, BLOCK_TOKENS)
        rec.scheduled_mono_s = due
        rec.local_token_scale = prompts.calibration.text_scale
        await send_request(client, plan, Send(rec, prompt), req.output_tokens, request_options(plan, req.output_tokens))
        on_record(rec)

    await arrivals.open_loop(items, start_s, plan.inflight_cap, send)


def _record(plan: CasePlan, index: int, req: TraceRequest, reuse: int, template: int) -> RequestRecord:
    """The request's record before it is sent. Its unique tokens leave room for the chat
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
        expected_cached_tokens=reuse,
        unique_tokens=max(0, req.input_tokens - reuse - template),
    )
