"""The request plan of a case: what the load stage sends and how it is bounded.

A CasePlan is a case (workloads/) with the run's settings that shape its load: runs, warmups,
--requests / --duration, the seed of its arrivals and this process's share of it. Every sender
(the load generator, a conversation, a trace replay) takes one, with a CaseIO to send through.

What each of them makes of it is a list (or a lazy stream) of PlannedRequests: what to send and
when, which load/send.py, the one send loop, sends. Each request's record says which case and
run it belongs to; its tags (records/plan.py), which turn, group and so on: the plan's, not the record's.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from benchy.client.client import Client
from benchy.load import arrivals, drain
from benchy.load.images import ImageSettings
from benchy.load.prompts import Prompt, PromptFactory, Template, exact_length_options
from benchy.load.saved import LoadSetup
from benchy.records import RequestRecord
from benchy.records.plan import NO_TAGS, RequestTags, Sent
from benchy.workloads import agent_trace, trace
from benchy.workloads.case import POOLING_ENDPOINTS, Case
from benchy.workloads.spec import MultiTurn, TraceReplay

IMAGE_ENDPOINTS = ("chat", "responses", "messages")  # the APIs with image parts (client/images.py)


@dataclass(frozen=True)
class LoadSettings:
    """How each case's load is bounded and spread (arrivals.py, workers.py): the run's flags that
    every CasePlan is made with."""

    requests: int | None = None  # --requests: measured requests per case
    duration_s: float | None = None  # --duration: no request is sent after this many seconds
    drain_s: float | None = None  # --drain: then those in flight get this long (None: drain.default_drain)
    max_inflight: int | None = None  # --max-inflight: cap on a rate case's requests in flight
    seed: int = 0  # --seed of the Poisson schedules
    workers: int | None = None  # --workers; None: what each case needs (workers.auto_workers)
    slo: dict[str, float] | None = None  # --slo, for goodput: {metric: threshold}
    ray: str | None = None  # --ray [ADDRESS]: every case on Ray actors (cluster.py)
    ray_workers_per_node: int | None = None  # --ray-workers-per-node (None: 1)
    batch: int = 1  # --batch: inputs per request of a pooling endpoint (--endpoint embeddings)
    images: ImageSettings | None = None  # --images: the images each request carries (load/images.py)

    def saved(self) -> LoadSetup:
        """As results.json keeps them (setup.load): the drain the cases got, default or not (a
        file's reader need not know the default); Ray's and --batch's only where used."""
        on_ray = self.ray is not None
        return LoadSetup(
            requests=self.requests,
            duration_s=self.duration_s,
            drain_s=None if self.duration_s is None else drain.default_drain(self.duration_s, self.drain_s),
            max_inflight=self.max_inflight,
            seed=self.seed,
            workers=self.workers,
            slo=self.slo,
            ray=self.ray,
            ray_workers_per_node=(self.ray_workers_per_node or 1) if on_ray else None,
            batch=self.batch if self.batch > 1 else None,
            images=self.images.saved() if self.images else None,
        )

    def check(self, cases: list[Case], endpoint: str = "chat") -> None:
        """ValueError for a setting that none of the cases can use."""
        if self.batch > 1 and any((c.endpoint or endpoint) not in POOLING_ENDPOINTS for c in cases):
            raise ValueError(
                "--batch needs --endpoint embeddings or rerank: only a pooling endpoint takes a list of inputs"
            )
        if self.images and any((c.endpoint or endpoint) not in IMAGE_ENDPOINTS or c.kind != "sweep" for c in cases):
            raise ValueError(
                "--images needs plain cases (--pp/--tg, no workload, dataset or trace) on --endpoint chat, "
                "responses or messages: only those take an image beside the text (docs/images.md)"
            )
        if self.max_inflight is not None and all(c.rate is None and c.kind != "trace" for c in cases):
            raise ValueError(
                "--max-inflight needs --rate, --trace or a scenario with rate or trace "
                "(a closed loop keeps exactly --concurrency in flight)"
            )

    def streams(self, case: Case) -> int:
        """Connections a case may hold open at once (an uncapped open loop: no fixed bound)."""
        if case.rate is None and case.kind != "trace":
            return case.concurrency
        return self.max_inflight or UNCAPPED_CONNECTIONS


UNCAPPED_CONNECTIONS = 100_000  # an open loop without --max-inflight: never queue inside the client


@dataclass(frozen=True)
class CasePlan:
    """A case with everything the load generator needs to send it."""

    case: Case
    index: int
    runs: int
    warmup: int
    endpoint: str
    salt: str
    template: Template = Template()  # --template / --reasoning-effort
    stop: tuple[str, ...] = ()  # --stop
    requests: int | None = None  # --requests: measured requests of the case
    duration_s: float | None = None  # --duration: no request is sent after this many seconds
    drain_s: float | None = None  # --drain: then those in flight get this long (None: drain.default_drain)
    max_inflight: int | None = None  # --max-inflight: cap on a rate case's requests in flight
    seed: int = 0  # --seed of the arrival schedule (a rate case's own: seed + index)
    worker: int = 0  # this process sends share `worker` of `workers` (workers.py)
    workers: int = 1
    alone: int = 0  # requests of the case's shape sent alone before it (load/alone.py)
    batch: int = 1  # --batch: inputs per request (--endpoint embeddings; generator.py)
    images: ImageSettings | None = None  # --images (load/images.py; generator.py)

    @property
    def measured(self) -> int:
        """Measured requests of the whole case, every worker's; 0 for a closed loop bounded
        only by --duration, which sends until the time is up."""
        if self.case.kind == "multi_turn":
            spec = multi_turn_spec(self)  # cold baselines are controls; sub-agents: N calls a turn but the last
            return self.case.concurrency * (spec.turns + spec.subagents * (spec.turns - 1))
        if self.case.kind == "trace":
            path = trace_spec(self).path
            if agent_trace.is_agent_trace(path):  # its calls: no length counted for a count
                return len(agent_trace.limited(agent_trace.load(path), self.trace_limit).calls)
            return len(trace.load(path, self.trace_limit))
        if self.case.kind == "dataset" and self.case.dataset is not None:
            return self.requests or self.case.dataset.entries  # by default as many as the file holds
        if self.case.rate is not None:
            return arrivals.rate_requests(self.case.rate, self.requests, self.duration_s)
        if self.requests is not None:
            return self.requests
        if self.duration_s is not None:
            return 0
        return self.runs * self.case.concurrency

    @property
    def drain_window(self) -> float:
        """Seconds the requests in flight get once --duration is up (load/drain.py); inf: no bound."""
        window = drain.default_drain(self.duration_s, self.drain_s)
        return math.inf if window is None else window

    @property
    def trace_limit(self) -> int | None:
        """A trace case's first N requests: the scenario's max_requests, else --requests."""
        return trace_spec(self).limit or self.requests

    @property
    def expected_records(self) -> int | None:
        """Records the whole case will write (context, warmups, measured); None when a closed
        loop is bounded only by --duration."""
        if self.case.rate is None and self.requests is None and self.duration_s is not None:
            return None
        return self.alone + self.warmup + self.measured + self.contexts

    @property
    def contexts(self) -> int:
        """Shared contexts sent alone first: one per group of a cached-depth case; none in cold mode."""
        return self.case.groups if self.case.depth_mode == "cached" and self.case.depth else 0

    @property
    def streams(self) -> int:
        """This worker's share of the requests kept in flight (closed loop)."""
        return len(arrivals.share(self.case.concurrency, self.worker, self.workers))

    @property
    def inflight_cap(self) -> int | None:
        """This worker's share of --max-inflight (open loop)."""
        if self.max_inflight is None:
            return None
        return max(1, len(arrivals.share(self.max_inflight, self.worker, self.workers)))


@dataclass(frozen=True)
class CaseIO:
    """What a workload's own runner (benchy/workloads) sends through and reports to: the client,
    the prompt maker, where each finished record goes, and `start()`, the measured start that
    workers share (None: now); `on_sent`: told of each request as it is sent (its plan line)."""

    client: Client
    prompts: PromptFactory
    on_record: Callable[[RequestRecord], None]
    start: Callable[[], Awaitable[float]] | None = None
    on_sent: OnSent | None = None


@dataclass(slots=True)
class PlannedRequest:
    """One request of a plan: what to send (the planned record the client's answer is made
    onto, the prompt as the endpoint takes it, the body's options) and when — as soon as a
    stream is free (a closed loop), at `at_s` seconds after the start (an open loop), or made
    by its predecessor's `then` from that one's record, `pause_s` after it (a conversation's
    next turn). `tags`: where it stands in its workload (records/plan.py), written as it is sent."""

    record: RequestRecord
    prompt: str  # the template rendered; "" where the body carries the messages
    max_tokens: int
    endpoint: str
    body: dict[str, Any]  # request options (shared by the case's requests: never changed per request)
    harmony: bool = False  # split the completion's Harmony channels
    at_s: float | None = None  # open loop: due this long after the start
    pause_s: float = 0.0  # dependent: sent this long after its predecessor ended
    then: Callable[[RequestRecord], PlannedRequest | None] | None = None  # the next request, or None
    tags: RequestTags = NO_TAGS

    def sent(self) -> Sent:
        return Sent(self.record, self.tags)

    @property
    def case(self) -> str:
        return self.record.case

    @property
    def run(self) -> int:
        return self.record.run

    @property
    def turn(self) -> int | None:
        return self.tags.turn

    @property
    def group(self) -> int | None:
        return self.tags.group


OnSent = Callable[[Sent], None]  # told of each request as it is sent (the sink writes its plan line)


def planned(
    plan: CasePlan,
    record: RequestRecord,
    prompt: Prompt,
    tg: int,
    body: dict[str, Any],
    at_s: float | None = None,
    tags: RequestTags = NO_TAGS,
) -> PlannedRequest:
    """A request of the case's endpoint, its template rendered around the prompt."""
    text = plan.template.render(prompt.text, plan.endpoint)
    return PlannedRequest(record, text, tg, plan.endpoint, body, plan.template.parses(plan.endpoint), at_s, tags=tags)


def request_options(plan: CasePlan, tg: int) -> dict[str, Any]:
    """Exact-length options, the template's options and the user's stop strings. A stop list
    replaces min_tokens: vLLM (and benchy sim) ignore stop strings until min_tokens are out,
    and a stop that never acts would hide the very trap it sets (report 000: 0-token answers)."""
    options = exact_length_options(tg)
    if plan.stop:
        del options["min_tokens"]
        options["stop"] = list(plan.stop)
    options.update(plan.template.request_options(plan.endpoint))
    options.update(plan.case.extra_fields())  # a scenario's extra_body
    if not plan.case.stream:  # a scenario's stream = false (the client reads the answer whole)
        options["stream"] = False
    return options


def multi_turn_spec(plan: CasePlan) -> MultiTurn:
    workload = plan.case.workload
    assert isinstance(workload, MultiTurn), "not a multi-turn case"
    return workload


def trace_spec(plan: CasePlan) -> TraceReplay:
    workload = plan.case.workload
    assert isinstance(workload, TraceReplay), "not a trace case"
    return workload
