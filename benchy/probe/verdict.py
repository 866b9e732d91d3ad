"""The verdict of one probed length: one-sided tests on log TTFT, weighed with the server's own
cached_tokens (the verdicts and their meaning: benchy/probe/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.probe.figures import figure, p_value

ALPHA = 0.05
MIN_SPEEDUP = 1.2  # a cache that saves less than this is not worth calling one
VERDICTS = ("detected", "not_detected", "cache_hit_no_gain", "partial_hits", "inconclusive")
# Judged by timing alone (no cached_tokens), a hit must beat every unique-prefix TTFT by this much.
TIMING_HIT_SPEEDUP = 2.0
SERVED_SHARE = 0.5  # a repeat with this share of its prompt reported cached was served from cache


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
    by_hits: bool = True,
) -> Verdict:
    """The verdict for one length from the repeat and unique TTFTs (seconds), weighed with the
    server's own cached_tokens (and llama.cpp's timings.prompt_ms) for the repeats. by_hits
    False: no repeat is told a hit on its own (an image cache saves the encoding, rarely the 2x
    a hit by timing needs), so the two TTFT samples alone decide."""
    partial = _partial_hits(repeats, unique, repeat_cached, prompt_tokens) if by_hits else None
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
    gain, miss_gain = figure("speedup", unique, hits), figure("speedup", unique, misses)
    # The misses rule the two modes out only when they too are faster, as `detected` would
    # judge it (a test, not a ratio of medians that a few noisy TTFTs can tip), or the hits
    # are no faster than the unique prefixes.
    miss_p = figure("p_faster", misses, unique)
    if (miss_gain >= MIN_SPEEDUP and miss_p < ALPHA) or gain < MIN_SPEEDUP:
        return None
    fraction = len(hits) / len(repeats)
    reason = (
        f"{len(hits)} of {len(repeats)} repeats ({fraction:.0%}) were served from cache (by {evidence}), "
        f"{gain:.1f}× faster than unique prefixes; the other {len(misses)} were not significantly faster "
        f"than unique ones ({miss_gain:.2f}×, Welch p = {miss_p:.2g}): the likely cause is a router "
        "spreading requests over replicas that each hold their own cache (no cache affinity), or "
        "eviction between repeats"
    )
    return Verdict(
        "partial_hits", reason, speedup=figure("speedup", unique, repeats), hit_fraction=fraction, gain_on_hits=gain
    )


def _served(cached: Sequence[int | None], prompt_tokens: int | None) -> float | None:
    """The median cached count when the server reports every repeat mostly cached, else None."""
    reported = [c for c in cached if c is not None]
    if not cached or len(reported) < len(cached) or not prompt_tokens:
        return None
    median = figure("cached_tokens", reported)
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
    server_ms, ttft_ms = figure("server_prompt_ms", known), 1000 * figure("ttft_s", repeats)
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
    slowed = [t / MIN_SPEEDUP for t in unique]  # unique TTFTs as a cache of exactly MIN_SPEEDUP would make them
    speedup = figure("speedup", unique, repeats)
    p_faster, p_below = figure("p_faster", repeats, unique), figure("p_faster", slowed, repeats)
    figures = dict(speedup=speedup, p_faster=p_faster, p_below_min=p_below)
    if p_faster < ALPHA and speedup >= MIN_SPEEDUP:
        verdict, rank_p = "detected", p_value("rank_p", repeats, unique)
        reason = f"repeats {speedup:.2f}× faster than unique prefixes (Welch p = {p_faster:.2g})"
    elif p_below < ALPHA:
        verdict, rank_p = "not_detected", p_value("rank_p", slowed, repeats)
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
    median = figure("cached_tokens", reported)
    served = median >= 0.5 * prompt_tokens
    if verdict == "detected" and not served:
        return f"the server reports only {median:.0f} of {prompt_tokens} prompt tokens cached"
    return None  # not_detected with a served cache: decide() calls it cache_hit_no_gain
