"""The load generator: sends a case's requests, keeping exactly N in flight (closed loop), or on
a seeded Poisson schedule (open loop, `--rate`: arrivals.py); `--requests` / `--duration` bound
a case, and workers.py runs one share of it per process (CasePlan.worker of .workers).

Prompts are built before the first request of a case is sent, so tokenizing an 8k-token prompt
never delays a send. Warmups go first, are recorded (marked `warmup`) and never counted.

`--depth-mode cached`: before anything else the case's shared context is sent alone (one output
token, recorded as a warmup with index -1), so every later request of the case finds it in the
server's prefix cache; each record says how many context tokens it reuses, and checks.py
verifies from the server's `cached_tokens` that they really were served from cache.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from benchy.client.stream import Client
from benchy.load import arrivals
from benchy.load.conversations import run_conversations
from benchy.load.plan import CaseIO, CasePlan, Send, request_options, send_request
from benchy.load.prompts import Prompt, PromptFactory
from benchy.load.replay import replay
from benchy.measure.records import RequestRecord


def _context_sends(plan: CasePlan, prompts: PromptFactory) -> list[Send]:
    """The shared contexts of a cached-depth case (one; a shared-prefix case: one per group),
    each sent alone first; none in cold mode."""
    case = plan.case
    sends = []
    for group in range(plan.contexts):
        context = prompts.context(case.depth)
        rec = RequestRecord(
            case=case.label,
            run=-1,
            index=-1,
            warmup=True,
            request_id=f"benchy-{plan.salt}-{plan.index}ctx" + (str(group) if case.groups > 1 else ""),
            nonce=context.nonce,
            target_prompt_tokens=case.depth,
            target_output_tokens=1,
            group=group if case.kind == "shared_prefix" else None,
        )
        sends.append(Send(rec, context))
    return sends


def _sends(
    plan: CasePlan, prompts: PromptFactory, contexts: Sequence[Prompt] = ()
) -> tuple[list[Send], Iterable[Send]]:
    case = plan.case
    shared = case.kind == "shared_prefix"

    def make(i: int, warm: bool) -> Send:
        context = contexts[i % len(contexts)] if contexts else None
        prompt = prompts.build(case.pp, case.depth, context)
        tag = "w" if warm else "m"
        rec = RequestRecord(
            case=case.label,
            run=-1 if warm else i // case.concurrency,
            index=i,
            warmup=warm,
            request_id=f"benchy-{plan.salt}-{plan.index}{tag}{i}",
            nonce=prompt.nonce,
            target_prompt_tokens=case.depth + case.pp,
            target_output_tokens=case.tg,
            reused_context_tokens=case.depth if context else 0,
            group=i % case.groups if shared and context else None,
            expected_cached_tokens=(case.depth if context else 0) if shared else None,
            unique_tokens=round((prompt.unique_local_tokens or prompt.local_tokens) * prompts.calibration.scale)
            if shared
            else None,
            local_token_scale=prompts.calibration.text_scale,
        )
        return Send(rec, prompt)

    warmups = [make(i, True) for i in arrivals.share(plan.warmup, plan.worker, plan.workers)]
    if plan.case.rate is None and plan.requests is None and plan.duration_s is not None:
        # Sent until the time is up, so built as sent: a few ms per prompt, in a closed loop.
        return warmups, (make(i, False) for i in itertools.count(plan.worker, plan.workers))
    return warmups, [make(i, False) for i in arrivals.share(plan.measured, plan.worker, plan.workers)]


def runner_for(plan: CasePlan) -> Callable[[CasePlan, CaseIO], Awaitable[None]] | None:
    """The workload's own loop for this case, or None: the load generator sends it. A
    shared-prefix case is a cached-depth case of the load generator (one context per group); a
    conversation needs a dependent loop (the next turn waits for the answer); a trace leaves at
    its own times."""
    if plan.case.kind == "multi_turn":
        return run_conversations
    if plan.case.kind == "trace":
        return replay
    return None


async def run_case(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    on_record: Callable[[RequestRecord], None],
    start: Callable[[], Awaitable[float]] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Context and warmups, then the measured requests from `await start()` (a perf_counter
    time; workers.py passes one shared by every worker process), closed or open loop; a
    multi-turn or trace case runs its workload's own loop (benchy/workloads).

    Once `stop` is set (by on_record, on too many errors, or by a parent process) nothing more
    is sent and the requests in flight are cancelled, unrecorded: the case ends early."""
    stop = stop or asyncio.Event()
    task = asyncio.ensure_future(_run_case(client, plan, prompts, on_record, start, stop))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopped):
            pending.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    if not task.cancelled():
        task.result()  # a failure of the case itself (never a stop) is raised here


async def _run_case(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    on_record: Callable[[RequestRecord], None],
    start: Callable[[], Awaitable[float]] | None,
    stop: asyncio.Event,
) -> None:
    workload_runner = runner_for(plan)
    if workload_runner is not None:
        await workload_runner(plan, CaseIO(client, prompts, on_record, start))
        return
    contexts = _context_sends(plan, prompts)
    warmups, measured = _sends(plan, prompts, [c.prompt for c in contexts])
    extra = request_options(plan, plan.case.tg)
    for context in contexts:
        await send_request(client, plan, context, 1, request_options(plan, 1))
        on_record(context.record)
    await _closed_loop(client, plan, warmups, extra, on_record, stop)
    await client.warm(plan.inflight_cap or plan.streams)  # a connection per stream, before any is timed
    start_s = await start() if start else time.perf_counter()
    deadline = arrivals.duration_deadline(start_s, plan.duration_s)
    if plan.case.rate is not None:
        await _open_loop(client, plan, measured, extra, on_record, stop, start_s, deadline)
    else:
        await _closed_loop(client, plan, measured, extra, on_record, stop, deadline)


async def _open_loop(
    client: Client,
    plan: CasePlan,
    sends: Iterable[Send],
    extra: dict,
    on_record: Callable[[RequestRecord], None],
    stop: asyncio.Event,
    start_s: float,
    deadline: float,
) -> None:
    """Each request at its arrival time (arrivals.py); arrivals after --duration are not sent."""
    assert plan.case.rate is not None  # an open-loop case
    offsets = arrivals.arrival_offsets(plan.measured, plan.case.rate, plan.seed + plan.index)
    items = [(offsets[s.record.index], s) for s in sends if start_s + offsets[s.record.index] < deadline]

    async def send(item: Send, due: float) -> None:
        if stop.is_set():
            return
        item.record.scheduled_mono_s = due
        await send_request(client, plan, item, plan.case.tg, extra)
        on_record(item.record)

    await arrivals.open_loop(items, start_s, plan.inflight_cap, send)


async def _closed_loop(
    client: Client,
    plan: CasePlan,
    sends: Iterable[Send],
    extra: dict,
    on_record: Callable[[RequestRecord], None],
    stop: asyncio.Event,
    deadline: float = math.inf,
) -> None:
    """N workers, each sending its next request the moment its last one ends, until `deadline`."""
    queue = iter(sends)

    async def worker() -> None:
        for send in queue:
            if stop.is_set() or time.perf_counter() >= deadline:
                return
            await send_request(client, plan, send, plan.case.tg, extra)
            on_record(send.record)

    streams = max(1, plan.streams)  # a rate case's warmups: one at a time, in every worker
    n = streams if not isinstance(sends, list) else min(streams, len(sends))
    workers = [asyncio.ensure_future(worker()) for _ in range(n)]
    try:
        await asyncio.gather(*workers)
    finally:
        # A worker that raised ends the others: none may go on sending, nor record a request
        # that the failure cut short.
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
