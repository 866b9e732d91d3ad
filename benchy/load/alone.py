"""Requests sent alone before a loaded case: the TTFT the server gives with nothing else in flight.

Why: under load, TTFT holds whatever a request waited before its prefill began. A server that
reports its own timings (llama.cpp's `prompt_ms`, vLLM's queue-time histogram) says how much;
one that does not (vLLM without /metrics, Ollama) leaves only the client's clock, and a prefill
rate taken from a queued TTFT is no prefill speed at all (issue 23: 221 t/s printed where the
server prefilled 5,000). So before a closed-loop case with several streams, and only where the
run has no concurrency-1 case of the same shape to compare with, benchy sends a few requests of
that prompt shape one at a time, one output token each. Their TTFT is the baseline that
results/build.py judges the loaded TTFT against. They are recorded (warmup and `alone`), never
counted in the case's figures, and sent before the case's warmups and outside its server-metrics
window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchy.client.stream import Client
from benchy.load.plan import CasePlan, PlannedRequest, planned, request_options
from benchy.load.prompts import Calibration, PromptFactory
from benchy.load.send import Closed, send
from benchy.measure.records import RequestRecord
from benchy.workloads.case import Case

ALONE_REQUESTS = 3  # the median of three is robust to one slow (cold) request


def same_shape(a: Case, b: Case) -> bool:
    """Two cases whose requests have the same prompt (a TTFT of one is a baseline of the other)."""
    return (a.pp, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.depth, b.depth_mode, b.endpoint)


def alone_requests(case: Case, cases: Sequence[Case]) -> int:
    """How many alone requests `case` needs: none unless it is a closed-loop sweep case with more
    than one stream (an open loop's queueing is its arrivals'; a workload's TTFT is judged by its
    own controls), and none where the run has a concurrency-1 case of the same shape."""
    if case.concurrency <= 1 or case.rate is not None or case.kind != "sweep" or case.depth_mode == "cached":
        return 0
    if any(c.concurrency == 1 and c.rate is None and c.kind == "sweep" and same_shape(c, case) for c in cases):
        return 0
    return ALONE_REQUESTS


async def send_alone(
    client: Client,
    plan: CasePlan,
    calibration: Calibration,
    nonce: bool,
    on_record: Callable[[RequestRecord], None],
) -> None:
    """The plan's alone requests, one after another (nothing else of benchy's in flight)."""
    await send(client, alone_plan(plan, calibration, nonce), on_record, Closed(1))


def alone_plan(plan: CasePlan, calibration: Calibration, nonce: bool) -> list[PlannedRequest]:
    """The case's prompt shape, plan.alone times, one output token each, recorded as warmups."""
    case = plan.case
    prompts = PromptFactory(calibration, nonce=nonce, salt=f"{plan.salt}a{plan.index}")
    body = request_options(plan, 1)
    requests = []
    for i in range(plan.alone):
        prompt = prompts.build(case.pp, case.depth)
        rec = RequestRecord(
            case=case.label,
            run=-1,
            index=-2 - i,
            warmup=True,
            request_id=f"benchy-{plan.salt}-{plan.index}a{i}",
            nonce=prompt.nonce,
            target_prompt_tokens=case.depth + case.pp,
            target_output_tokens=1,
            local_token_scale=calibration.scale,
            alone=True,
        )
        requests.append(planned(plan, rec, prompt, 1, body))
    return requests
