"""The load generator: plans a case's requests and runs them in order — contexts, warmups, the
measured ones — through the one send loop (send.py), keeping exactly N in flight (closed loop),
or on a seeded Poisson schedule (open loop, `--rate`: arrivals.py); `--requests` / `--duration`
bound a case, and workers.py runs one share of it per process (CasePlan.worker of .workers).

Prompts are built before the first request of a case is sent, so tokenizing an 8k-token prompt
never delays a send: all of a case's up to PREBUILT requests (fewer of long prompts), and of a
longer one a window that far ahead of the send loop (`Ahead`), each request taken replaced by a
later one built once the taken one has gone out. A 200,000-request soak so holds a window of
prompts and records, not 200,000 of them (issue 26). Warmups go first, are recorded (marked
`warmup`) and never counted.

`--depth-mode cached`: before anything else the case's shared context is sent alone (one output
token, recorded as a warmup with index -1), so every later request of the case finds it in the
server's prefix cache; each record says how many context tokens it reuses, and checks.py
verifies from the server's `cached_tokens` that they really were served from cache.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

from benchy.client.client import Client
from benchy.load import arrivals, images
from benchy.load.conversations import run_conversations
from benchy.load.dataset_load import run_natural, with_dataset
from benchy.load.plan import CaseIO, CasePlan, OnSent, PlannedRequest, multi_turn_spec, planned, request_options
from benchy.load.prompts import Prompt, PromptFactory
from benchy.load.replay import replay
from benchy.load.send import Closed, Open, send
from benchy.load.subagents import run_subagents
from benchy.records import RequestRecord
from benchy.records.plan import RequestTags
from benchy.workloads import spread

PREBUILT = 4096  # measured requests built ahead of the send loop, at most
PREBUILT_TOKENS = 4_000_000  # and at most about this many prompt tokens (an 8k prompt: 488 of them)


class Ahead(Iterator[PlannedRequest]):
    """A case's measured requests made `window` ahead of the send loop that takes them: the
    first `window` are built at once (before the case starts), and each one taken is replaced
    by the next, built on the event loop's next turn, once the taken one is on its way (built
    at once when no loop runs, or when the sender caught up with the window)."""

    def __init__(self, make: Callable[[int], PlannedRequest], indices: Iterable[int], window: int) -> None:
        self._make = make
        self._indices = iter(indices)
        self._ready: deque[PlannedRequest] = deque()
        self._top_up(max(1, window))

    def __next__(self) -> PlannedRequest:
        if not self._ready:
            self._top_up(1)
            if not self._ready:
                raise StopIteration
        request = self._ready.popleft()
        try:
            asyncio.get_running_loop().call_soon(self._top_up, 1)
        except RuntimeError:  # no loop: iterated outside the send loop
            self._top_up(1)
        return request

    def _top_up(self, n: int) -> None:
        for i in itertools.islice(self._indices, n):
            self._ready.append(self._make(i))


def window(plan: CasePlan) -> int:
    """How many of a case's measured requests are built ahead: PREBUILT, fewer of long prompts,
    never fewer than a few per stream."""
    tokens = max(1, plan.case.depth + plan.case.pp)
    return max(4 * plan.streams, min(PREBUILT, PREBUILT_TOKENS // tokens))


def shared_contexts(plan: CasePlan, prompts: PromptFactory) -> list[tuple[RequestRecord, RequestTags, Prompt]]:
    """The shared contexts of a cached-depth case (one; a shared-prefix case: one per group),
    each sent alone first; none in cold mode."""
    case = plan.case
    contexts = []
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
        )
        contexts.append((rec, RequestTags(group=group if case.kind == "shared_prefix" else None), context))
    return contexts


def case_requests(
    plan: CasePlan, prompts: PromptFactory, contexts: Sequence[Prompt] = ()
) -> tuple[list[PlannedRequest], Iterable[PlannedRequest]]:
    """This worker's warmups and measured requests; a rate case's measured ones carry their
    arrival times (arrivals.py: the same seeded schedule in every worker)."""
    case = plan.case
    shared = case.kind == "shared_prefix"
    body = request_options(plan, case.tg)
    offsets = None if case.rate is None else arrivals.arrival_offsets(plan.measured, case.rate, plan.seed + plan.index)
    label = case.label  # a property that formats it: once, not once a request

    def make(i: int, warm: bool) -> PlannedRequest:
        context = contexts[i % len(contexts)] if contexts else None
        pp, tg = (case.pp, case.tg) if warm else lengths(plan, i)
        prompt = prompts.build(pp, case.depth, context)
        own = body
        if plan.batch > 1:  # --endpoint embeddings: more inputs of the same length, each its own nonce
            more = [prompts.build(pp, case.depth, context).text for _ in range(plan.batch - 1)]
            own = {**body, "input": [prompt.text, *more]}
        tag = "w" if warm else "m"
        rec = RequestRecord(
            case=label,
            run=-1 if warm else i // case.concurrency,
            index=i,
            warmup=warm,
            request_id=f"benchy-{plan.salt}-{plan.index}{tag}{i}",
            nonce=prompt.nonce,
            target_prompt_tokens=(case.depth + pp) * plan.batch,
            target_output_tokens=tg,
        )
        tags = prompts.calibration.tags(
            reused_context_tokens=case.depth if context else 0,
            group=i % case.groups if shared and context else None,
            expected_cached_tokens=(case.depth if context else 0) if shared else None,
            unique_tokens=prompts.unique_tokens(prompt) if shared else None,
            prompt_slack=prompts.calibration.prompt_slack,
        )
        options = own if tg == case.tg else request_options(plan, tg)  # a drawn length's own
        if plan.images:  # --images: drawn from the nonce (or the case's shared ones), sent beside the text
            tags, options = images.with_images(plan.images, tags, options, prompt.nonce or rec.request_id, plan.salt)
        return planned(plan, rec, prompt, tg, options, None if warm or offsets is None else offsets[i], tags)

    warmups = [make(i, True) for i in arrivals.share(plan.warmup, plan.worker, plan.workers)]
    if plan.case.rate is None and plan.requests is None and plan.duration_s is not None:
        # Sent until the time is up, so built as sent: a few ms per prompt, in a closed loop.
        return warmups, (make(i, False) for i in itertools.count(plan.worker, plan.workers))
    return warmups, Ahead(
        lambda i: make(i, False), arrivals.share(plan.measured, plan.worker, plan.workers), window(plan)
    )


def lengths(plan: CasePlan, i: int) -> tuple[int, int]:
    """Measured request i's prompt and output lengths: the case's, or drawn around them
    (--pp-stddev / --tg-stddev, workloads/spread.py)."""
    case = plan.case
    return (
        spread.prompt_length(case.pp, case.pp_stddev, plan.seed, plan.index, i),
        spread.output_length(case.tg, case.tg_stddev, plan.seed, plan.index, i),
    )


def runner_for(plan: CasePlan) -> Callable[[CasePlan, CaseIO], Awaitable[None]] | None:
    """The workload's own loop for this case, or None: the load generator sends it. A
    shared-prefix case is a cached-depth case of the load generator (one context per group); a
    conversation needs a dependent loop (the next turn waits for the answer); a trace leaves at
    its own times."""
    if plan.case.kind == "multi_turn":
        return run_subagents if multi_turn_spec(plan).subagents else run_conversations
    if plan.case.kind == "trace":
        return replay
    if plan.case.kind == "dataset":
        return run_natural
    return None


async def run_case(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    on_record: Callable[[RequestRecord], None],
    start: Callable[[], Awaitable[float]] | None = None,
    stop: asyncio.Event | None = None,
    on_sent: OnSent | None = None,
) -> None:
    """Context and warmups, then the measured requests from `await start()` (a perf_counter
    time; workers.py passes one shared by every worker process), closed or open loop; a
    multi-turn or trace case runs its workload's own loop (benchy/workloads).

    Once `stop` is set (by on_record, on too many errors, or by a parent process) nothing more
    is sent and the requests in flight are cancelled, unrecorded: the case ends early.
    `on_sent` is told of each request as it leaves (the sink writes its plan line)."""
    stop = stop or asyncio.Event()
    task = asyncio.ensure_future(_run_case(client, plan, prompts, on_record, start, stop, on_sent))
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
    on_sent: OnSent | None,
) -> None:
    prompts = with_dataset(plan, prompts)  # --dataset: its text in place of the filler
    workload_runner = runner_for(plan)
    if workload_runner is not None:
        await workload_runner(plan, CaseIO(client, prompts, on_record, start, on_sent))
        return
    contexts = shared_contexts(plan, prompts)
    warmups, measured = case_requests(plan, prompts, [prompt for _, _, prompt in contexts])
    one_token = request_options(plan, 1)
    context_requests = [planned(plan, rec, prompt, 1, one_token, tags=tags) for rec, tags, prompt in contexts]
    await send(client, context_requests, on_record, Closed(1), stop, on_sent)  # each alone, in turn
    await send(client, warmups, on_record, Closed(plan.streams), stop, on_sent)  # a rate case's: one at a time
    await client.warm(plan.inflight_cap or plan.streams)  # a connection per stream, before any is timed
    start_s = await start() if start else time.perf_counter()
    deadline = arrivals.duration_deadline(start_s, plan.duration_s)
    pace = (
        Open(start_s, plan.inflight_cap, deadline, plan.drain_window)
        if plan.case.rate is not None
        else Closed(plan.streams, deadline, plan.drain_window)
    )
    await send(client, measured, on_record, pace, stop, on_sent)
