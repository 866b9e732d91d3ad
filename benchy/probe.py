"""`benchy probe-cache`: does the server cache prompt prefixes, and how much does that save?

For each prompt length, N requests share one prefix (the first pays for prefill, the rest may
be served from cache) and N have unique prefixes (their own nonce first). They are sent one at a
time and interleaved (shared, unique, shared, unique, …) so that drift hits both alike, each
with a few output tokens. TTFT is metrics.ttft_s. The verdict per length rests on one-sided
Welch t-tests on log TTFT, repeats (shared after the first) against unique:
  detected      repeats are faster (p < ALPHA) and the median speed-up is at least MIN_SPEEDUP
  not_detected  the speed-up is significantly below MIN_SPEEDUP (p < ALPHA)
  cache_hit_no_gain  not detected by timing, yet the server reports most of every repeat's
                prompt cached: the cache works but something outside prefill (llama.cpp's
                host-RAM prompt cache copying slots, queueing) takes the time it saves
  partial_hits  some repeats were served from cache and the others took as long as unique
                prefixes (bimodal): a hit fraction and the gain on hits, not one blurred
                speed-up; the likely cause is a router spreading requests over replicas that
                each hold their own cache (no cache affinity), or eviction between repeats
  inconclusive  neither; or fewer than 2 TTFTs a side; or the Mann–Whitney U rank test (used
                where n lets it reach ALPHA) disagrees; or the server's cached_tokens
                contradict a detected speed-up
Every prompt starts with a nonce of this probe, so its shared prefix cannot serve a later run.

--capacity: how much the cache really holds for reuse. A pass sends K distinct prefixes of
the same length once each, then each again in the same order, so that every one is re-used only
after all the others were sent: an LRU cache that holds the K of them hits on every re-use, one
that does not hits on none. K doubles from 1 until fewer than CAPACITY_HIT_SHARE of the re-uses
hit, then bisects between the last K that fitted and the first that did not. The cliff is
reported in prompt tokens (K × the prefix's server-counted length, what all prefixes share, the
chat template as the first sends found it cached, counted once) as the midpoint of that
bracket, ± half its width, beside what the server says its KV cache holds (server/capacity.py).
A hit is the server's cached_tokens (≥ SERVED_SHARE of the prompt) where it reports them for
every re-use, else a re-use TTFT TIMING_HIT_SPEEDUP× faster than the same prefix's first send.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchy import __version__
from benchy.client import loop as event_loop
from benchy.client.client import Client
from benchy.client.redact import redact_url
from benchy.client.settings import ClientSettings
from benchy.load.lengths import fit_lengths
from benchy.load.plan import PlannedRequest, exact_length_options
from benchy.load.prompts import Prompt, PromptFactory, calibrate
from benchy.load.send import Closed, send
from benchy.measure import gpu as gpu_figures
from benchy.measure import metrics, stats
from benchy.measure.gpu import GpuCase
from benchy.measure.metrics import Unavailable
from benchy.measure.records import RecordWriter, RequestRecord
from benchy.results.types import PROBE_SCHEMA
from benchy.server import cache_reset
from benchy.server import capacity as capacity_mod
from benchy.server import gpu as gpu_mod
from benchy.server import identity as server_mod

SCHEMA = PROBE_SCHEMA  # results.py names every saved schema
DEFAULT_LENGTHS = (2000, 8000, 27000)
ALPHA = 0.05
MIN_SPEEDUP = 1.2  # a cache that saves less than this is not worth calling one
CONTEXT_MARGIN = 0.02  # calibration is within ±1%: keep prompts clear of the context limit
VERDICTS = ("detected", "not_detected", "cache_hit_no_gain", "partial_hits", "inconclusive")
# Judged by timing alone (no cached_tokens), a hit must beat every unique-prefix TTFT by this much.
TIMING_HIT_SPEEDUP = 2.0
SERVED_SHARE = 0.5  # a repeat with this share of its prompt reported cached was served from cache


@dataclass
class ProbeSettings:
    client: ClientSettings
    capacity: bool = False  # --capacity: the capacity sweep instead of the per-length probe
    capacity_prefix_tokens: int = 1024
    capacity_max_tokens: int = 262144
    cache_reset: bool = False  # --cache-reset: empty the cache before each length (each capacity pass)
    lengths: list[int] = field(default_factory=lambda: list(DEFAULT_LENGTHS))
    n: int = 5  # requests per side and length
    tg: int = 8  # output tokens: only the first one matters
    endpoint: str = "chat"
    command_line: str = ""
    on_length: object = None  # callable(length) before each length is probed, for progress
    gpu_metrics: str | None = None  # --gpu-metrics: the GPUs sampled over each length (server/gpu.py)
    records_path: Path | None = None  # -o: requests.jsonl, each probe request's record as it finishes


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    speedup: float | None = None
    p_faster: float | None = None  # Welch: repeats faster than unique
    p_below_min: float | None = None  # Welch: speed-up below MIN_SPEEDUP
    rank_p: float | None = None  # Mann–Whitney U for the hypothesis the verdict rests on
    hit_fraction: float | None = None  # partial_hits: the share of repeats served from cache
    gain_on_hits: float | None = None  # partial_hits: median unique TTFT ÷ median TTFT of the hits


# ---- statistics ---------------------------------------------------------------------------


def decide(
    repeats: list[float],
    unique: list[float],
    repeat_cached: Sequence[int | None] = (),
    prompt_tokens: int | None = None,
    repeat_prompt_ms: Sequence[float | None] = (),
) -> Verdict:
    """The verdict for one length from the repeat and unique TTFTs (seconds), weighed with the
    server's own cached_tokens (and llama.cpp's timings.prompt_ms) for the repeats."""
    partial = _partial_hits(repeats, unique, repeat_cached, prompt_tokens)
    if partial is not None:
        return partial
    verdict = _timing_verdict(repeats, unique, repeat_cached, prompt_tokens)
    gained = verdict.p_faster is not None and verdict.p_faster < ALPHA and (verdict.speedup or 0) >= MIN_SPEEDUP
    if verdict.verdict in ("not_detected", "inconclusive") and verdict.speedup is not None and not gained:
        served = _served(repeat_cached, prompt_tokens)
        if served is not None and prompt_tokens:
            return _no_gain(verdict, served, prompt_tokens, repeats, repeat_prompt_ms)
    return verdict


def repeat_hits(
    repeats: list[float], unique: list[float], cached: Sequence[int | None], prompt_tokens: int | None
) -> tuple[list[bool], str] | None:
    """Which repeats were served from cache, and by what evidence: the server's cached_tokens
    where it reports them for every repeat, else a TTFT that beats every unique prefix by
    TIMING_HIT_SPEEDUP; None when neither can tell."""
    if cached and len(cached) == len(repeats) and all(c is not None for c in cached) and prompt_tokens:
        return [(c or 0) >= SERVED_SHARE * prompt_tokens for c in cached], "the server's cached_tokens"
    if len(unique) < 2 or not repeats:
        return None
    fastest_unique = min(unique)
    return [t * TIMING_HIT_SPEEDUP < fastest_unique for t in repeats], "TTFT"


def _partial_hits(
    repeats: list[float], unique: list[float], cached: Sequence[int | None], prompt_tokens: int | None
) -> Verdict | None:
    """The bimodal case: some repeats hit, the rest were no faster than unique prefixes."""
    judged = repeat_hits(repeats, unique, cached, prompt_tokens)
    if judged is None or len(unique) < 2:
        return None
    flags, evidence = judged
    hits = [t for t, hit in zip(repeats, flags) if hit]
    misses = [t for t, hit in zip(repeats, flags) if not hit]
    if not hits or not misses:
        return None
    u = stats.median(unique)
    gain, miss_gain = u / stats.median(hits), u / stats.median(misses)
    if miss_gain >= MIN_SPEEDUP or gain < MIN_SPEEDUP:
        return None  # the misses were faster too, or the hits no faster: not two modes
    fraction = len(hits) / len(repeats)
    reason = (
        f"{len(hits)} of {len(repeats)} repeats ({fraction:.0%}) were served from cache (by {evidence}), "
        f"{gain:.1f}× faster than unique prefixes; the other {len(misses)} took as long as unique ones "
        f"({miss_gain:.2f}×): the likely cause is a router spreading requests over replicas that each "
        "hold their own cache (no cache affinity), or eviction between repeats"
    )
    return Verdict("partial_hits", reason, speedup=u / stats.median(repeats), hit_fraction=fraction, gain_on_hits=gain)


def _served(cached: Sequence[int | None], prompt_tokens: int | None) -> float | None:
    """The median cached count when the server reports every repeat mostly cached, else None."""
    reported = [c for c in cached if c is not None]
    if not cached or len(reported) < len(cached) or not prompt_tokens:
        return None
    median = stats.median(reported)
    return median if median >= SERVED_SHARE * prompt_tokens else None


def _no_gain(
    timing: Verdict, served: float, prompt_tokens: int, repeats: list[float], prompt_ms: Sequence[float | None]
) -> Verdict:
    speedup = f"{timing.speedup:.2f}×" if timing.speedup else "no"
    reason = (
        f"the server reports {served:.0f} of {prompt_tokens} prompt tokens cached on the repeats, yet they "
        f"are only {speedup} faster than unique prefixes (not significantly ≥ {MIN_SPEEDUP}×): "
        f"{_no_gain_cause(repeats, prompt_ms)}"
    )
    fields = {k: getattr(timing, k) for k in ("speedup", "p_faster", "p_below_min", "rank_p")}
    return Verdict("cache_hit_no_gain", reason, **fields)


def _no_gain_cause(repeats: list[float], prompt_ms: Sequence[float | None]) -> str:
    known = [p for p in prompt_ms if isinstance(p, (int, float))]
    cause = (
        "time outside prefill hides the saving (llama.cpp's host-RAM prompt cache copies slot state "
        "before each prefill: try --cache-ram 0; or requests queue behind others)"
    )
    if not known:
        return cause
    server_ms, ttft_ms = stats.median(known), 1000 * stats.median(repeats)
    return f"the server's own prompt time for them is {server_ms:,.0f} ms of a {ttft_ms:,.0f} ms TTFT, so {cause}"


def _timing_verdict(
    repeats: list[float], unique: list[float], repeat_cached: Sequence[int | None], prompt_tokens: int | None
) -> Verdict:
    """The verdict from the TTFTs alone, unless cached_tokens contradict a detected speed-up."""
    if len(repeats) < 2 or len(unique) < 2:
        return Verdict(
            "inconclusive",
            f"only {len(repeats)} repeat and {len(unique)} unique TTFTs "
            "were measured; the test needs at least 2 of each",
        )
    r, u = np.asarray(repeats, float), np.asarray(unique, float)
    speedup = stats.median(u) / stats.median(r)
    p_faster, p_below = stats.log_welch_less(r, u), stats.log_welch_less(u / MIN_SPEEDUP, r)
    figures = dict(speedup=speedup, p_faster=p_faster, p_below_min=p_below)
    if p_faster < ALPHA and speedup >= MIN_SPEEDUP:
        verdict, rank_p = "detected", stats.exact_rank_less(r, u)
        reason = f"repeats {speedup:.2f}× faster than unique prefixes (Welch p = {p_faster:.2g})"
    elif p_below < ALPHA:
        verdict, rank_p = "not_detected", stats.exact_rank_less(u / MIN_SPEEDUP, r)
        reason = f"speed-up {speedup:.2f}× is significantly below {MIN_SPEEDUP}× (Welch p = {p_below:.2g})"
    else:
        return Verdict(
            "inconclusive",
            f"speed-up {speedup:.2f}× is neither significantly ≥ "
            f"{MIN_SPEEDUP}× (p = {p_faster:.2g}) nor below it (p = {p_below:.2g}); "
            "send more requests (-n)",
            **figures,
        )
    if rank_p is not None and rank_p >= ALPHA:
        return Verdict(
            "inconclusive",
            f"{reason}, but the Mann–Whitney U test disagrees (p = {rank_p:.2g}): outliers?",
            rank_p=rank_p,
            **figures,
        )
    if rank_p is not None:
        reason += f"; Mann–Whitney U p = {rank_p:.2g}"
    conflict = _cache_report_conflict(verdict, repeat_cached, prompt_tokens)
    if conflict:
        return Verdict("inconclusive", f"{reason}, but {conflict}", rank_p=rank_p, **figures)
    return Verdict(verdict, reason, rank_p=rank_p, **figures)


def _cache_report_conflict(verdict: str, cached: Sequence[int | None], prompt_tokens: int | None) -> str | None:
    """The server's own cached_tokens, where it reports them for every repeat, must agree."""
    reported = [c for c in cached if c is not None]
    if not cached or len(reported) < len(cached) or not prompt_tokens:
        return None
    median = stats.median(reported)
    served = median >= 0.5 * prompt_tokens
    if verdict == "detected" and not served:
        return f"the server reports only {median:.0f} of {prompt_tokens} prompt tokens cached"
    return None  # not_detected with a served cache: decide() calls it cache_hit_no_gain


# ---- sending ------------------------------------------------------------------------------


class ProbeTooLong(ValueError):
    """--capacity-prefix-tokens longer than the server's context: a usage error, before sending."""


def capacity_prefix_limit(context: int | None, tg: int) -> int | None:
    """The longest capacity prefix the server's context holds with its output (None: no limit known)."""
    return int(context * (1 - CONTEXT_MARGIN)) - tg if context else None


def capped_lengths(lengths: list[int], context: int | None, tg: int) -> list[tuple[int, int]]:
    """(length to send, length asked) pairs, each length capped to fit the context; no repeats."""
    limit = int(context * (1 - CONTEXT_MARGIN)) - tg if context else None
    out: dict[int, int] = {}
    for asked in lengths:
        out.setdefault(min(asked, limit) if limit else asked, asked)
    return list(out.items())


def _request(settings: ProbeSettings, record: RequestRecord, prompt: Prompt, body: dict) -> PlannedRequest:
    """One probe request: the prompt as it is (no template), a few exact output tokens."""
    return PlannedRequest(record, prompt.text, settings.tg, settings.endpoint, body)


def _plan(settings: ProbeSettings, length: int, prompts: PromptFactory, salt: str) -> list[PlannedRequest]:
    """shared 1, unique 1, shared 2, unique 2, …: one shared prompt text, N unique ones."""
    shared = prompts.build(length)
    body = exact_length_options(settings.tg)
    requests = []
    for i in range(settings.n):
        for side, prompt in (("shared", shared), ("unique", prompts.build(length))):
            rec = RequestRecord(
                case=f"probe {length} {side}",
                run=i,
                index=i,
                warmup=False,
                request_id=f"benchy-probe-{salt}-{length}-{side[0]}{i}",
                nonce=prompt.nonce,
                target_prompt_tokens=length,
                target_output_tokens=settings.tg,
            )
            requests.append(_request(settings, rec, prompt, body))
    return requests


async def _one_at_a_time(
    client: Client, requests: list[PlannedRequest], on_record: Callable[[RequestRecord], None]
) -> list[RequestRecord]:
    """The requests in turn (a queue would add its wait to the TTFT); their records (judged
    once all are in; `on_record` gets each as it finishes, to write it down)."""
    await send(client, requests, on_record, Closed(1))
    return [r.record for r in requests]


async def _probe_length(
    client: Client, settings: ProbeSettings, length: int, prompts: PromptFactory, salt: str, writer: RecordWriter
) -> list[RequestRecord]:
    return await _one_at_a_time(client, _plan(settings, length, prompts, salt), writer.write)


CAPACITY_HIT_SHARE = 0.5  # a working set whose re-uses hit at least this often still fits
CAPACITY_PRECISION = 0.1  # bisect until the bracket's half-width is this share of its middle
CAPACITY_MAX_PASSES = 14


async def _capacity_pass(
    client: Client, settings: ProbeSettings, prompts: PromptFactory, k: int, salt: str, writer: RecordWriter
) -> dict:
    """K distinct prefixes, each sent once, then each again in the same order: the point
    {prefixes, hits, judged, hit_fraction, …} of this working set."""
    length = settings.capacity_prefix_tokens
    sent = [prompts.build(length) for _ in range(k)]
    body = exact_length_options(settings.tg)
    requests = []
    for side in ("first", "reuse"):
        for i, prompt in enumerate(sent):
            rec = RequestRecord(
                case=f"capacity {k} {side}",
                run=0,
                index=i,
                warmup=False,
                request_id=f"benchy-capacity-{salt}-{k}-{side[0]}{i}",
                nonce=prompt.nonce,
                target_prompt_tokens=length,
                target_output_tokens=settings.tg,
            )
            requests.append(_request(settings, rec, prompt, body))
    records = await _one_at_a_time(client, requests, writer.write)
    return capacity_point(k, records[:k], records[k:])


def capacity_point(k: int, firsts: list[RequestRecord], reuses: list[RequestRecord]) -> dict:
    pairs = [(a, b) for a, b in zip(firsts, reuses) if a.ok and b.ok]
    prompt = [b.prompt_tokens for _, b in pairs if b.prompt_tokens]
    prompt_tokens = int(stats.median(prompt)) if prompt else None
    hits, evidence = _pair_hits(pairs, prompt_tokens)
    # What every prefix shares with the others (the chat template), as the first sends found it
    # cached: held once, so the working set counts it once.
    first_cached = [a.cached_tokens for a, _ in pairs if a.cached_tokens is not None]
    shared = min(int(stats.median(first_cached)), prompt_tokens or 0) if first_cached else 0
    first_ttft = [t for t in (_ttft(a) for a, _ in pairs) if not isinstance(t, Unavailable)]
    reuse_ttft = [t for t in (_ttft(b) for _, b in pairs) if not isinstance(t, Unavailable)]
    return {
        "prefixes": k,
        "prompt_tokens": prompt_tokens,
        "shared_tokens": shared,
        "working_set_tokens": k * (prompt_tokens - shared) + shared if prompt_tokens else None,
        "judged": len(hits),
        "hits": sum(hits),
        "hit_fraction": sum(hits) / len(hits) if hits else None,
        "evidence": evidence,
        "first_ttft_s": stats.median(first_ttft) if first_ttft else None,
        "reuse_ttft_s": stats.median(reuse_ttft) if reuse_ttft else None,
        "n_failed": sum(not r.ok for r in firsts + reuses),
        "first_errors": first_errors([r for r in firsts + reuses if not r.ok]),
        "reuse_cached_tokens": [b.cached_tokens for _, b in pairs],
        "request_ids": [b.request_id for _, b in pairs],
    }


def _pair_hits(pairs: list[tuple[RequestRecord, RequestRecord]], prompt_tokens: int | None) -> tuple[list[bool], str]:
    """Per (first, re-use) pair, whether the re-use was served from cache, and by what."""
    if pairs and prompt_tokens and all(b.cached_tokens is not None for _, b in pairs):
        return [(b.cached_tokens or 0) >= SERVED_SHARE * prompt_tokens for _, b in pairs], "cached_tokens"
    timed = [
        (ta, tb)
        for ta, tb in ((_ttft(a), _ttft(b)) for a, b in pairs)
        if isinstance(ta, float) and isinstance(tb, float)
    ]
    if not timed:
        return [], "ttft"
    typical_first = stats.median(ta for ta, _ in timed)
    # Faster than its own first send and than the pass's typical first send: one slow first
    # send (a busy client) does not make a miss look like a hit.
    out = [tb * TIMING_HIT_SPEEDUP < min(ta, typical_first) for ta, tb in timed]
    return out, "ttft"


async def _capacity(
    client: Client, settings: ProbeSettings, prompts: PromptFactory, salt: str, reset, writer: RecordWriter
) -> dict:
    """The capacity sweep (see the module docstring); `reset`: an async callable or None."""
    points: list[dict] = []
    fits = falls = None

    async def measure(k: int) -> dict | None:
        nonlocal fits, falls
        if reset is not None:
            await reset()
        if callable(settings.on_length):
            settings.on_length(f"capacity: {k} prefix(es)")
        point = await _capacity_pass(client, settings, prompts, k, salt, writer)
        points.append(point)
        if point["hit_fraction"] is None:
            return None
        if point["hit_fraction"] >= CAPACITY_HIT_SHARE:
            fits = k
        else:
            falls = k
        return point

    k = 1
    while k * settings.capacity_prefix_tokens <= settings.capacity_max_tokens and falls is None:
        if await measure(k) is None:
            break
        k *= 2
    while fits and falls and falls - fits > 1 and len(points) < CAPACITY_MAX_PASSES:
        if (falls - fits) / (falls + fits) <= CAPACITY_PRECISION:
            break
        if await measure((fits + falls) // 2) is None:
            break
    return capacity_result(settings, sorted(points, key=lambda p: p["prefixes"]), fits, falls)


def _working_set(points: list[dict], k: int | None) -> int | None:
    """The working set, in tokens, of the pass with k prefixes (None: no such pass)."""
    return next((p["working_set_tokens"] for p in points if p["prefixes"] == k), None)


def capacity_result(settings: ProbeSettings, points: list[dict], fits: int | None, falls: int | None) -> dict:
    sizes = [p["prompt_tokens"] for p in points if p["prompt_tokens"]]
    prompt = int(stats.median(sizes)) if sizes else None
    out: dict = {
        "prefix_tokens_asked": settings.capacity_prefix_tokens,
        "prefix_tokens": prompt,
        "max_tokens": settings.capacity_max_tokens,
        "hit_share": CAPACITY_HIT_SHARE,
        "points": points,
        "fits_prefixes": fits,
        "falls_prefixes": falls,
        "cliff_tokens": None,
        "uncertainty_tokens": None,
    }
    if prompt is None:
        failures = {k: v for p in points for k, v in (p.get("first_errors") or {}).items()}
        said = "".join(f"; first {kind}: {message}" for kind, message in sorted(failures.items()))
        out.update(verdict="unmeasured", reason=f"no prefix and its re-use both succeeded: nothing to judge{said}")
    elif falls is None:
        out.update(
            verdict="beyond_max",
            reason=f"re-uses still hit with {fits or 0} prefixes ({_working_set(points, fits) or 0:,} tokens): the cache "
            f"holds at least that (--capacity-max-tokens {settings.capacity_max_tokens:,} stopped the sweep)",
        )
    elif not fits:
        out.update(
            verdict="below_one_prefix",
            cliff_tokens=prompt / 2,
            uncertainty_tokens=prompt / 2,
            reason=f"even one {prompt:,}-token prefix was not served again: the cache holds less than one "
            "prefix for reuse, or it is off",
        )
    else:
        low, high = _working_set(points, fits) or fits * prompt, _working_set(points, falls) or falls * prompt
        out.update(
            verdict="found",
            cliff_tokens=(low + high) / 2,
            uncertainty_tokens=(high - low) / 2,
            reason=f"re-uses hit with {fits} prefixes ({low:,} tokens) and fell below "
            f"{CAPACITY_HIT_SHARE:.0%} with {falls} ({high:,} tokens): the cache holds about "
            f"{(low + high) / 2:,.0f} ± {(high - low) / 2:,.0f} prompt tokens for reuse",
        )
    return out


async def _probe(settings: ProbeSettings) -> dict:
    gpus = None
    try:
        async with Client(settings.client) as client:
            model = await client.choose_model()
            if settings.gpu_metrics is not None:
                gpus = await gpu_mod.start_sampler(settings.gpu_metrics)
            with contextlib.closing(RecordWriter(settings.records_path)) as writer:
                return await _probe_with(settings, client, model, gpus, writer)
    finally:
        if gpus is not None:
            await gpus.close()


async def _probe_with(settings: ProbeSettings, client: Client, model: str, gpus, writer: RecordWriter) -> dict:
    # The context one request may hold (llama.cpp: per slot, from /props): longer prompts
    # would only come back as HTTP 400s.
    identity = await server_mod.identify(client, client.base, model)
    context = identity.context_length
    limit = capacity_prefix_limit(context, settings.tg)
    if settings.capacity and limit is not None and settings.capacity_prefix_tokens > limit:
        raise ProbeTooLong(
            f"--capacity-prefix-tokens {settings.capacity_prefix_tokens:,} does not fit the server's context of "
            f"{context:,} tokens ({identity.context_source}) with --tg {settings.tg}: every request would be "
            f"refused; pass --capacity-prefix-tokens {limit:,} or less"
        )
    salt = secrets.token_hex(6)
    fit = await fit_lengths(client, None, settings.endpoint)  # the words one server token each
    calibration = await calibrate(client, settings.endpoint, salt, lengths=fit)
    prompts = PromptFactory(calibration, salt=f"{salt}probe")
    setup = _setup(settings, model, await client.server_version(), context, calibration.to_dict())
    setup["context_source"] = identity.context_source
    if gpus is not None:
        setup["gpu"] = gpus.setup.to_dict()
    reset, resets = _resetter(client, identity, settings.cache_reset)
    entries = []
    lengths = [] if settings.capacity else capped_lengths(settings.lengths, context, settings.tg)
    kept = {asked for _, asked in lengths}
    setup["lengths_not_probed"] = [  # capped to a length another asked length already probes
        {"asked": asked, "reason": f"capped to the server's context ({context:,} tokens), as a shorter one was"}
        for asked in ([] if settings.capacity else settings.lengths)
        if asked not in kept
    ]
    for length, asked in lengths:
        if reset is not None:
            await reset()
        if callable(settings.on_length):
            settings.on_length(length)
        window = gpus.window() if gpus is not None else None
        if window is not None:
            await window.open()
        records = await _probe_length(client, settings, length, prompts, salt, writer)
        entries.append(length_entry(length, asked, records))
        if window is not None:
            await window.close()
            entries[-1]["gpu"] = _gpu_entry(window.result, records, gpus)
    out: dict = {"schema": SCHEMA, "benchy_version": __version__, "setup": setup, "lengths": entries}
    if settings.capacity:
        out["capacity"] = await _capacity(client, settings, prompts, salt, reset, writer)
        out["capacity"]["stated"] = (await capacity_mod.stated_capacity(client, client.base, identity)).to_dict()
    if settings.cache_reset:
        setup["cache_reset"] = {"calls": len(resets), "last": resets[-1] if resets else None}
    return out


def _resetter(client: Client, identity, wanted: bool):
    """(an async reset, the list its outcomes go to), or (None, []) without --cache-reset. A
    server that has no reset is asked once: its answer is kept, and no more calls are made."""
    outcomes: list[dict] = []
    if not wanted:
        return None, outcomes

    async def reset() -> None:
        if outcomes and not outcomes[-1]["ok"]:
            return
        outcomes.append((await cache_reset.reset(client, client.base, identity)).to_dict())

    return reset, outcomes


def _gpu_entry(gpu: GpuCase, records: list[RequestRecord], gpus) -> dict:
    """The GPUs over one length's requests (both sides): energy per request and per output token."""
    ok = [r for r in records if metrics.classify(r).ok]
    idle = gpus.setup.baseline.power_w if gpus.setup.baseline else None
    gpu_figures.per_token(gpu, sum(metrics.completion_tokens(r) for r in ok), len(ok), idle)
    return gpu.to_dict()


def run_probe(settings: ProbeSettings) -> dict:
    """Probes the server; returns the probe dict (schema benchy/probe/1). Raises ServerError
    when the server cannot be used at all."""
    return event_loop.run(_probe(settings))


def _setup(settings: ProbeSettings, model: str, version: str | None, context: int | None, calibration: dict) -> dict:
    return {
        "base_url": redact_url(settings.client.base_url),
        "model": model,
        "server_version": version,
        "endpoint": settings.endpoint,
        "context_length": context,
        "n": settings.n,
        "output_tokens": settings.tg,
        "alpha": ALPHA,
        "min_speedup": MIN_SPEEDUP,
        "calibration": calibration,
        "command_line": settings.command_line,
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "benchy_version": __version__,
    }


# ---- results ------------------------------------------------------------------------------


def _ttft(rec: RequestRecord) -> float | Unavailable:
    return metrics.request_metrics(rec)["ttft_s"]


def _side(records: list[RequestRecord]) -> dict:
    ttfts = [_ttft(r) for r in records]
    return {
        "ttft_s": [None if isinstance(t, Unavailable) else t for t in ttfts],
        "cached_tokens": [r.cached_tokens for r in records],
        "prompt_tokens": [r.prompt_tokens for r in records],
        "request_ids": [r.request_id for r in records],
        "unavailable": sorted({t.reason for t in ttfts if isinstance(t, Unavailable)}),
    }


def length_entry(length: int, asked: int, records: list[RequestRecord]) -> dict:
    shared = [r for r in records if r.case.endswith("shared")]
    unique = [r for r in records if r.case.endswith("unique")]
    s, u = _side(shared), _side(unique)
    repeats = [t for t in s["ttft_s"][1:] if t is not None]
    uniques = [t for t in u["ttft_s"] if t is not None]
    reported = [p for p in s["prompt_tokens"] + u["prompt_tokens"] if p is not None]
    prompt_tokens = int(stats.median(reported)) if reported else None
    prompt_ms = [(r.server_timings or {}).get("prompt_ms") for r in shared[1:] if r.ok]
    verdict = decide(repeats, uniques, s["cached_tokens"][1:], prompt_tokens, prompt_ms)
    failed = [r for r in records if not r.ok]
    return {
        "length": length,
        "length_asked": asked,
        "prompt_tokens": prompt_tokens,
        "shared": s,
        "unique": u,
        "n_ok": len(records) - len(failed),
        "n_failed": len(failed),
        "errors": dict(Counter(r.error_kind for r in failed)),
        "first_errors": first_errors(failed),
        "speedup": verdict.speedup,
        "p_faster": verdict.p_faster,
        "p_below_min": verdict.p_below_min,
        "rank_p": verdict.rank_p,
        "hit_fraction": verdict.hit_fraction,
        "gain_on_hits": verdict.gain_on_hits,
        "verdict": verdict.verdict,
        "reason": _with_unavailable(verdict.reason, s, u),
        "requests": [r.to_dict() for r in records],
    }


def first_errors(failed: list[RequestRecord]) -> dict[str, str]:
    """The first failure of each kind, in the server's own words (e.g. its HTTP 400 text)."""
    first: dict[str, str] = {}
    for rec in failed:
        first.setdefault(str(rec.error_kind), rec.error or "")
    return first


def _with_unavailable(reason: str, *sides: dict) -> str:
    missing = sorted({why for side in sides for why in side["unavailable"]})
    return reason + "".join(f"; TTFT unavailable: {why}" for why in missing)
