"""Checks of the server's prefix cache: hits where none were meant (prefix_cache_hit), a
context sent ahead that was not cached (depth_cache_miss), a cache-aware workload's reuse
(cache_eviction, cache_not_reused, cache_partial_reuse, cache_not_reported, cache_leakage;
measure/workloads.py finds them) and a --cache-reset that could not empty it
(cache_reset_unavailable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import Code, Warning_
from benchy.measure.miss_causes import EXPIRY_GAP_MIN_S
from benchy.measure.workloads import Eviction, Leakage, NoReuse, PartialReuse, WorkloadFigures
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
    Setup,
)
from benchy.results.verdicts import details
from benchy.results.verdicts.details import RequestCount, taken_from
from benchy.results.view import RunView


@dataclass(frozen=True)
class Hits:
    """Requests served from the prefix cache beyond the chat template: how many, of how many,
    the most cached tokens of one, and the template's tokens."""

    requests: int
    of_requests: int
    cached_max: int
    template: float


class PrefixCacheHit(Check[Hits]):
    code = Code.PREFIX_CACHE_HIT

    def detect(self, case: CaseResult, run: RunView) -> Hits | None:
        template = template_tokens(run.setup)
        # A cached --depth context is meant to hit (depth_cache_miss checks it); only the rest counts.
        # Requests of a cache-aware workload (they carry unique_tokens) are meant to hit: the
        # workload checks judge their reuse instead.
        facts = case.facts()
        threshold = max(template, 0) + 0.5
        hits = [cached for excess, cached in zip(facts.cache_excess, facts.cache_excess_cached) if excess > threshold]
        return Hits(len(hits), facts.n_ok, max(hits), template) if hits else None

    def words(self, case: CaseResult, found: Hits) -> CheckWarning:
        most, template = found.cached_max, found.template
        return Warning_(
            Code.PREFIX_CACHE_HIT,
            self.severity,
            case.label,
            f"{found.requests} of {found.of_requests} requests were partly served from the "
            f"server's prefix cache (up to {most} cached prompt tokens beyond the "
            f"{template:.0f}-token chat template): TTFT, prefill and end-to-end figures are "
            "inflated.",
            "Keep the nonce on (no --no-nonce) so no request shares a prefix with another.",
            details=details.PrefixCacheHit(requests=found.requests, cached_tokens_max=most, template_tokens=template),
            evidence=(Evidence("cached_tokens_max", most, template, "tokens"),),
        )


prefix_cache_hit = PrefixCacheHit()  # registered by this name (checks/warnings.py)


def template_tokens(setup: Setup) -> float:
    """The chat template's tokens, as calibration measured them (0 without a calibration)."""
    return setup.calibration.overhead_tokens if setup.calibration else 0.0


@dataclass(frozen=True)
class ContextMissed:
    """Requests that reused a context sent ahead the server did not serve from its cache: how
    many, of how many reused one, the context's tokens and the most cached tokens any of them
    reported (None: none reported cached tokens at all)."""

    requests: int
    of_requests: int
    depth: int
    cached_max: int | None


class DepthCacheMiss(Check[ContextMissed]):
    """--depth-mode cached: the server must report the context it was sent ahead as cached."""

    code = Code.DEPTH_CACHE_MISS

    def detect(self, case: CaseResult, run: RunView) -> ContextMissed | None:
        facts = case.facts()  # context_served judged each request that reused one
        if not facts.n_context_missed or _partial(case) is not None:  # some hit: routing, not a cache that is off
            return None
        most = facts.missed_cached_max if facts.missed_cached_known else None
        return ContextMissed(facts.n_context_missed, facts.n_reusing, facts.missed_context, most)

    def words(self, case: CaseResult, found: ContextMissed) -> CheckWarning:
        if found.cached_max is None:
            what = "the server reports no cached_tokens, so benchy cannot verify it; prefill t/s is unavailable"
        else:
            what = (
                f"the server reported at most {found.cached_max} cached tokens, so it prefilled the context again: "
                "prefill t/s covers depth + pp there, not the pp tokens alone"
            )
        return Warning_(
            Code.DEPTH_CACHE_MISS,
            self.severity,
            case.label,
            f"{found.requests} of {found.of_requests} requests reused a {found.depth}-token context sent ahead, but {what}.",
            "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt) "
            "or a larger cache, or measure with --depth-mode cold.",
        )


depth_cache_miss = DepthCacheMiss()


# Cache-aware workloads (benchy/measure/workloads.py finds these; a shared-prefix case's miss is
# depth_cache_miss's, since its prefixes are cached contexts).
CACHE_HINT = (
    "The server's prefix cache is smaller than what the load keeps alive: give it more room "
    "(vLLM: --gpu-memory-utilization, --num-gpu-blocks-override; llama.cpp: --cache-ram, more "
    "--parallel slots; SGLang: --mem-fraction-static) or lower the concurrency."
)


def _workload(case: CaseResult, *, judged: bool = False) -> WorkloadFigures | None:
    """The case's workload figures; judged: only where eviction and no-reuse are this module's
    (a shared-prefix case's prefixes are cached contexts: depth_cache_miss judges those)."""
    figures = case.workload
    if figures is None or (judged and figures.kind == "shared_prefix"):
        return None
    return figures


class CacheEviction(Check[Eviction]):
    """Reuse worked, then fell short of what the server had already prefilled."""

    code = Code.CACHE_EVICTION

    def detect(self, case: CaseResult, run: RunView) -> Eviction | None:
        figures = _workload(case, judged=True)
        return figures.eviction if figures else None

    def words(self, case: CaseResult, found: Eviction) -> CheckWarning:
        ev = found
        where = f"turn {ev.turn} (conversation {ev.conversation})" if ev.turn else f"request {ev.request_id}"
        return Warning_(
            Code.CACHE_EVICTION,
            self.severity,
            case.label,
            f"The server stopped reusing what it had already prefilled from {where}, {ev.after_s:.1f} s into "
            f"the case with {ev.in_flight} requests in flight and {ev.held_tokens:,} prompt tokens held "
            f"across {'conversations' if ev.turn else 'requests'}: {ev.requests} of {ev.of_requests} "
            f"requests that should have reused earlier tokens reported fewer cached tokens ({ev.lost_tokens:,} "
            "tokens prefilled again). Their TTFT includes that prefill.",
            CACHE_HINT,
            details=taken_from(details.CacheEviction, ev),
            evidence=(Evidence("reported_cached_tokens", ev.reported_tokens, ev.expected_tokens, "tokens"),),
        )


cache_eviction = CacheEviction()


class CacheNotReused(Check[NoReuse]):
    """Requests that resent what the server had prefilled, none of it reported cached: the
    words tell a cache that expires from one that is off where the idle gaps can."""

    code = Code.CACHE_NOT_REUSED

    def detect(self, case: CaseResult, run: RunView) -> NoReuse | None:
        figures = _workload(case, judged=True)
        return figures.no_reuse if figures else None

    def words(self, case: CaseResult, found: NoReuse) -> CheckWarning:
        miss = found
        said = f"{miss.requests} requests resent {miss.expected_tokens:,} tokens the server had already prefilled"
        if miss.cause == "expiry" and miss.hit_idle_max_s is not None and miss.miss_idle_min_s is not None:
            message = (
                f"{said}, each after at least {miss.miss_idle_min_s:.2f} s idle, and it reported none of them as "
                f"cached. Its cache works: it served the start every prompt shares to {miss.start_hits} "
                f"request{'' if miss.start_hits == 1 else 's'} sent within {miss.hit_idle_max_s:.2f} s of another, and lost even that after "
                f"{miss.lost_idle_min_s or 0.0:.2f} s quiet. The likely cause: the cache lets entries expire after "
                f"a lifetime between {miss.hit_idle_max_s:.2f} and {miss.miss_idle_min_s:.2f} s."
            )
            hint = EXPIRY_HINT
        elif miss.miss_idle_min_s is not None and miss.miss_idle_min_s >= EXPIRY_GAP_MIN_S:
            message = (
                f"{said}, each after at least {miss.miss_idle_min_s:.2f} s idle, and it reported none of them as "
                "cached. Nothing in the case tells a prefix cache that is off (or does not report hits) from one "
                f"that lets entries expire within {miss.miss_idle_min_s:.2f} s."
            )
            hint = f"{OFF_HINT} Then shorten --think-time: reuse that appears with shorter gaps means a cache lifetime."
        else:
            message = (
                f"{said}, and it reported none of them as cached: its prefix cache is off or does not report hits."
            )
            hint = OFF_HINT
        return Warning_(
            Code.CACHE_NOT_REUSED,
            self.severity,
            case.label,
            message,
            hint,
            details=taken_from(details.CacheNotReused, miss),
        )


cache_not_reused = CacheNotReused()


OFF_HINT = (
    "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt, SGLang's "
    "radix cache is on by default) and check that it reports usage.prompt_tokens_details.cached_tokens."
)


ROUTING_HINT = (
    "Behind a router, give it cache affinity (session or prefix-aware routing: SGLang router, llm-d, "
    "nginx hash on a session key), or measure one replica directly; otherwise see cache_eviction's hint."
)
EXPIRY_HINT = (
    "The cache forgets what sat idle too long (hosted prompt caches keep 5-10 minutes, LMCache a TTL): "
    "shorten --think-time below that lifetime to measure reuse, or raise the lifetime if the server lets you."
)


@dataclass(frozen=True)
class Router:
    """The router the base URL is (its /metrics status says so) and how many replicas it names."""

    name: str
    replicas: int


@dataclass(frozen=True)
class Partial:
    """A case's partial reuse, and the router behind the base URL if it is one."""

    reuse: PartialReuse
    router: Router | None


class CachePartialReuse(Check[Partial]):
    """Some requests reused what they should have, others not: a finding of its own, never
    "reported none" when some were reported."""

    code = Code.CACHE_PARTIAL_REUSE

    def detect(self, case: CaseResult, run: RunView) -> Partial | None:
        part = _partial(case)
        return Partial(part, _router(run)) if part is not None else None

    def words(self, case: CaseResult, found: Partial) -> CheckWarning:
        part = found.reuse
        cause = (
            f" The pattern: {part.pattern}."
            if part.pattern
            else " Hits and misses alternate, which eviction alone (hits, then misses) does not do."
        )
        cause += _router_words(found.router)
        return Warning_(
            Code.CACHE_PARTIAL_REUSE,
            self.severity,
            case.label,
            f"Partial reuse: {part.hit_requests} of {part.requests} requests ({part.hit_fraction:.0%}) reused all the "
            f"history the server had prefilled, {part.partial_requests} reused part of it and {part.missed_requests} "
            f"none; the server reported {part.reported_tokens:,} of {part.expected_tokens:,} expected tokens "
            f"cached.{cause} TTFT mixes hits and misses.",
            EXPIRY_HINT if part.cause == "expiry" else ROUTING_HINT,
            details=taken_from(details.CachePartialReuse, part),
            evidence=(Evidence("hit_fraction", round(part.hit_fraction, 4), 1.0, "requests"),),
        )


cache_partial_reuse = CachePartialReuse()


def _partial(case: CaseResult) -> PartialReuse | None:
    """The case's partial reuse, a shared-prefix case's too (some of its requests found the
    prefix and others not: the prefix was sent ahead, so the cache works where it was)."""
    figures = _workload(case)
    part = figures.partial_reuse if figures else None
    if part is None or (figures is not None and figures.kind == "shared_prefix" and not part.hit_requests):
        return None
    return part


def _router(run: RunView) -> Router | None:
    status = run.setup.server_metrics
    if status is None or not status.router:
        return None
    return Router(status.router, len(status.replicas))


def _router_words(router: Router | None) -> str:
    if router is None:
        return ""
    return f" The base URL is a router: its {router.name} names {router.replicas} replicas, each with its own cache."


class CacheNotReported(Check[RequestCount]):
    """A workload whose server never says how many tokens it served from cache."""

    code = Code.CACHE_NOT_REPORTED

    def detect(self, case: CaseResult, run: RunView) -> RequestCount | None:
        figures = _workload(case)
        if figures is None or figures.reuse.requests or not figures.reuse.unreported:
            return None
        return RequestCount(requests=figures.reuse.unreported)

    def words(self, case: CaseResult, found: RequestCount) -> CheckWarning:
        return Warning_(
            Code.CACHE_NOT_REPORTED,
            self.severity,
            case.label,
            f"None of the {found.requests} successful requests reported cached tokens "
            "(usage.prompt_tokens_details.cached_tokens): the reuse this workload is about cannot be "
            "verified, and eviction or leakage would go unseen. TTFT is measured all the same.",
            "vLLM: start it with --enable-prompt-tokens-details; other servers: check that usage "
            "carries prompt_tokens_details.cached_tokens.",
            details=found,
        )


cache_not_reported = CacheNotReported()


class CacheLeakage(Check[Leakage]):
    """More cached tokens than the request could share: its unique part was served from cache."""

    code = Code.CACHE_LEAKAGE

    def detect(self, case: CaseResult, run: RunView) -> Leakage | None:
        figures = _workload(case)
        return figures.leakage if figures else None

    def words(self, case: CaseResult, found: Leakage) -> CheckWarning:
        leak = found
        where = f", the first at turn {leak.turn}" if leak.turn else ""
        return Warning_(
            Code.CACHE_LEAKAGE,
            self.severity,
            case.label,
            f"{leak.requests} of {leak.of_requests} requests reported more cached tokens than they could "
            f"share with anything sent before (up to {leak.max_excess_tokens:,.0f} tokens into their unique, "
            f"nonce-led part{where}): the cache served text from another conversation or run, or the server "
            "miscounts cached tokens. Their TTFT is too good to be this workload's.",
            "Keep the nonce on (no --no-nonce); if it is on, the server's cached_tokens cannot be trusted.",
            details=taken_from(details.CacheLeakage, leak),
        )


cache_leakage = CacheLeakage()


class CacheResetUnavailable(RunLevelCheck[details.CacheResetUnavailable]):
    """--cache-reset asked for, and the server offers no way to empty its cache: what it found
    is the first failed reset's figures (its message says why) and every case whose reset failed."""

    code = Code.CACHE_RESET_UNAVAILABLE

    def detect(self, run: RunView) -> Sequence[details.CacheResetUnavailable]:
        failed = [c for c in run.cases if c.cache_reset and not c.cache_reset.ok]
        first = failed[0].cache_reset if failed else None
        if first is None:
            return ()
        return (taken_from(details.CacheResetUnavailable, first, cases=[c.label for c in failed]),)

    def words(self, run: RunView, found: details.CacheResetUnavailable) -> CheckWarning:
        return Warning_(
            Code.CACHE_RESET_UNAVAILABLE,
            self.severity,
            None,
            f"--cache-reset could not empty the server's prefix cache: {found.message}. "
            "The run went on without resets: its cases started on whatever the cache held.",
            "vLLM answers POST /reset_prefix_cache, SGLang POST /flush_cache, llama-server the slot erase "
            "only when started with --slot-save-path DIR; otherwise restart the server for a cold cache.",
            details=found,
        )


cache_reset_unavailable = CacheResetUnavailable()
