"""Requests sent alone before a loaded case: the TTFT the server gives with nothing else in flight.

Why: under load, TTFT holds whatever a request waited before its prefill began. A server that
reports its own timings (llama.cpp's `prompt_ms`, vLLM's queue-time histogram) says how much;
one that does not (vLLM without /metrics, Ollama) leaves only the client's clock, and a prefill
rate taken from a queued TTFT is no prefill speed at all (issue 23: 221 t/s printed where the
server prefilled 5,000). So before a loaded case, and only where the run has no concurrency-1
case of the same shape to compare with, benchy sends a few requests of that prompt shape one at
a time, one output token each. Their TTFT is the baseline that results/build.py judges the
loaded TTFT against. They are recorded (warmup and `alone`), never counted in the case's
figures, and sent before the case's warmups and outside its server-metrics window.

Loaded cases: a closed loop with several streams (`-c 4`); an open loop (`--rate`), whose
arrivals overlap whenever requests outlast the gap between them; a multi-turn workload with
several conversations, whose first turns (one nonce-led message each, all sent at once) are
the shape sent alone; a trace replay, whose requests each have their own length: there three
are sent alone at a short and three at a long length of the trace (its 10th and 90th
percentiles), so that results/build.py can judge each request against the TTFT its uncached
tokens take alone (a line through the two); a shared-prefix case with several streams (a
cache-aware router sends every request that shares a prefix to the replica that holds it, and
they queue there): as a trace, three alone at the unique part's length (what a hit prefills)
and three at the whole prompt's (a miss), nonce-led so that nothing of the case is warmed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchy.client.client import Client
from benchy.load import images
from benchy.load.agent_lengths import trace_requests
from benchy.load.plan import CasePlan, OnSent, PlannedRequest, planned, request_options, trace_spec
from benchy.load.prompts import Calibration, Prompt, PromptFactory
from benchy.load.send import Closed, send
from benchy.measure import stats
from benchy.records import RequestRecord
from benchy.records.plan import RequestTags
from benchy.workloads.case import Case
from benchy.workloads.spec import MultiTurn

ALONE_REQUESTS = 3  # the median of three is robust to one slow (cold) request
TRACE_PERCENTILES = (10, 90)  # a trace's short and long prompt lengths, sent alone


def same_shape(a: Case, b: Case) -> bool:
    """Two cases whose requests have the same prompt (a TTFT of one is a baseline of the other)."""
    return (a.pp, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.depth, b.depth_mode, b.endpoint)


def loaded(case: Case) -> bool:
    """Whether the case's requests can wait for one another at the server (module docstring).
    A pooling case never is: it has no TTFT for an alone baseline to judge."""
    if case.pooling:
        return False
    if case.kind == "shared_prefix":  # judged on the line of uncached tokens (module docstring)
        return case.concurrency > 1 or case.rate is not None
    if case.depth_mode == "cached":  # its context is cached: alone, the first one would not be
        return False
    if case.kind == "sweep":
        return case.rate is not None or case.concurrency > 1
    return case.kind == "trace" or (case.kind == "multi_turn" and case.concurrency > 1)


def alone_requests(case: Case, cases: Sequence[Case]) -> int:
    """How many alone requests `case` needs: none unless it is loaded, and none for a sweep case
    where the run has a closed-loop concurrency-1 case of the same shape (results/build.py takes
    that one's TTFTs)."""
    if not loaded(case):
        return 0
    if case.kind == "sweep" and any(single_stream(c) and same_shape(c, case) for c in cases):
        return 0
    return 2 * ALONE_REQUESTS if on_a_line(case) else ALONE_REQUESTS


def on_a_line(case: Case) -> bool:
    """Cases whose requests prefill different uncached lengths: judged against a line through
    alone requests at a short and a long one (results/build.py)."""
    return case.kind == "trace" or (case.kind == "shared_prefix" and case.depth > 0)


def single_stream(case: Case) -> bool:
    return case.kind == "sweep" and case.concurrency == 1 and case.rate is None


async def send_alone(
    client: Client,
    plan: CasePlan,
    calibration: Calibration,
    nonce: bool,
    on_record: Callable[[RequestRecord], None],
    on_sent: OnSent | None = None,
) -> None:
    """The plan's alone requests, one after another (nothing else of benchy's in flight)."""
    await send(client, alone_plan(plan, calibration, nonce), on_record, Closed(1), on_sent=on_sent)


def alone_plan(plan: CasePlan, calibration: Calibration, nonce: bool) -> list[PlannedRequest]:
    """The case's prompt shape, plan.alone times, one output token each, recorded as warmups."""
    case = plan.case
    prompts = PromptFactory(calibration, nonce=nonce, salt=f"{plan.salt}a{plan.index}")
    body = request_options(plan, 1)
    lengths = (
        _trace_lengths(plan) if case.kind == "trace" else [case.pp, case.depth + case.pp] if on_a_line(case) else []
    )
    requests = []
    for i in range(plan.alone):
        prompt = prompts.build(lengths[i % 2]) if lengths else _shape(case, prompts)
        rec = RequestRecord(
            case=case.label,
            run=-1,
            index=-2 - i,
            warmup=True,
            request_id=f"benchy-{plan.salt}-{plan.index}a{i}",
            nonce=prompt.nonce,
            target_prompt_tokens=_target(case, lengths, i),
            target_output_tokens=1,
        )
        tags, own = RequestTags(local_token_scale=calibration.scale, alone=True), body
        if plan.images:
            tags, own = images.with_images(plan.images, tags, body, prompt.nonce or rec.request_id, plan.salt)
        requests.append(planned(plan, rec, prompt, 1, own, tags=tags))  # the case's images too: its shape is theirs
    return requests


def _shape(case: Case, prompts: PromptFactory) -> Prompt:
    """The prompt the case's loaded requests have: a sweep case's, or a conversation's first
    message (load/conversations.py sends it as the one user message)."""
    if isinstance(case.workload, MultiTurn):
        return prompts.message(case.workload.first_tokens or case.pp)
    return prompts.build(case.pp, case.depth)


def _trace_lengths(plan: CasePlan) -> list[int]:
    """A short and a long prompt of the trace: its 10th and 90th percentile input lengths."""
    requests = trace_requests(trace_spec(plan).path, plan.trace_limit)
    lengths = [r.input_tokens for r in requests]
    return [round(stats.percentile(lengths, q)) for q in TRACE_PERCENTILES]


def _target(case: Case, lengths: list[int], i: int) -> int:
    if lengths:
        return lengths[i % 2]
    return 0 if case.workload else case.depth + case.pp  # a message's count is the template's too
