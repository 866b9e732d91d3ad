"""Where the server's account of a case disagrees with the client's (issue 17): typed warnings,
each with the figures of both sides. They read saved results only (the case's `server` entry,
from /metrics, beside its requests), like every check; each reads a case's requests once, a
request at a time (a long case's are on disk: results/rows.py).

  server_cache_hit      the server counted prefix-cache hits beyond what the chat template
                        (and a context sent ahead) explains, in a case whose prompts were all
                        unique: cache busting failed, and TTFT and prefill hold cached work.
  server_token_mismatch the server generated a different number of tokens than the client
                        counted for the same requests.
  ttft_outside_server   the client's TTFT exceeds the server's own by far more than a round
                        trip to it: a proxy, the client or connection set-up holds the rest.
  queue_dominates_ttft  most of the server's TTFT was queueing: the server is saturated at
                        this concurrency, and TTFT and prefill t/s hold queue time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# Tokens a request may legitimately find cached beyond its template: vLLM's cache blocks are 16
# tokens, so a template prefix rounds to a block either way.
CACHE_BLOCK_SLACK = 16
# Generated tokens may differ by one a request (a server counting an end token) and 2% in all.
TOKEN_SLACK_PER_REQUEST, TOKEN_SLACK_SHARE = 1, 0.02
# TTFT outside the server: more than this, this many round trips, and this share of TTFT.
OUTSIDE_MIN_S, OUTSIDE_RTTS, OUTSIDE_SHARE = 0.02, 3.0, 0.2
# Queueing above this share of the server's TTFT, and this long, dominates it (a few ms of a
# tiny TTFT are scheduling noise, not saturation).
QUEUE_SHARE, QUEUE_MIN_S = 0.5, 0.01


def server_figures(case: dict) -> dict | None:
    """The case's server figures from /metrics, or None."""
    server = case.get("server")
    return server if isinstance(server, dict) and server.get("engine") else None


def measured(case: dict) -> Iterator[dict]:
    """The measured requests, one at a time: a long case's are read from disk as they come."""
    return (r for r in case.get("requests", []) if not r.get("warmup"))


def histogram_mean(server: dict, name: str) -> float | None:
    h = (server.get("histograms") or {}).get(name)
    return h.get("mean") if h and h.get("count") else None


def client_mean(case: dict, metric: str) -> float | None:
    total, n = 0.0, 0
    for r in measured(case):
        value = (r.get("metrics") or {}).get(metric)
        if value is not None:
            total, n = total + value, n + 1
    return total / n if n else None


def cache_hit_finding(case: dict, setup: dict) -> dict | None:
    """The figures of a server_cache_hit warning, or None (prompts not unique, or hits explained)."""
    if case.get("kind", "sweep") != "sweep":
        return None  # a cache-aware workload means to hit; its own checks judge its reuse
    server = server_figures(case)
    hits = server.get("counters", {}).get("cache_hits") if server else None
    if server is None or not setup.get("prompt_nonce") or hits is None:
        return None
    template = (setup.get("calibration") or {}).get("overhead_tokens") or 0
    n = allowed = cached = n_cached = 0
    for r in measured(case):
        n += 1
        allowed += template + CACHE_BLOCK_SLACK + (r.get("reused_context_tokens") or 0)
        if r.get("cached_tokens") is not None:
            cached, n_cached = cached + r["cached_tokens"], n_cached + 1
    if hits <= allowed:
        return None
    return {
        "server_cache_hits": hits,
        "explained_hits": allowed,
        "server_cache_hit_rate": (server.get("derived") or {}).get("cache_hit_rate"),
        "requests": n,
        "usage_cached_tokens": cached if n_cached == n else None,
    }


def token_mismatch_finding(case: dict) -> dict | None:
    """The figures of a server_token_mismatch warning, or None. Only when every measured request
    succeeded: a failed one may have generated tokens the client never saw."""
    server = server_figures(case)
    generated = server.get("counters", {}).get("generation_tokens") if server else None
    if generated is None:
        return None
    n = client = 0
    for r in measured(case):
        n += 1
        # a failed one, or one without usage (the client's count is a floor: no_usage says so)
        if r.get("status") != "ok" or r.get("completion_tokens") is None:
            return None
        client += r["completion_tokens"]
    slack = max(TOKEN_SLACK_PER_REQUEST * n, TOKEN_SLACK_SHARE * client)
    if not n or abs(generated - client) <= slack:
        return None
    return {
        "server_generation_tokens": generated,
        "client_tokens": client,
        "requests": n,
        "difference": abs(generated - client),
        "slack": slack,
    }


def outside_finding(case: dict) -> dict | None:
    """The figures of a ttft_outside_server warning, or None."""
    server = server_figures(case)
    server_ttft = histogram_mean(server, "ttft_s") if server else None
    client_ttft = client_mean(case, "ttft_s")
    if server is None or server_ttft is None or client_ttft is None:
        return None
    gap, rtt = client_ttft - server_ttft, server.get("rtt_s") or 0.0
    bound = max(OUTSIDE_MIN_S, OUTSIDE_RTTS * rtt)
    if gap <= bound or gap <= OUTSIDE_SHARE * client_ttft:
        return None
    return {
        "client_ttft_s": client_ttft,
        "server_ttft_s": server_ttft,
        "outside_s": gap,
        "rtt_s": rtt,
        "bound_s": bound,
    }


def queue_finding(case: dict) -> dict | None:
    """The figures of a queue_dominates_ttft warning, or None."""
    server = server_figures(case)
    queue = histogram_mean(server, "queue_s") if server else None
    ttft = histogram_mean(server, "ttft_s") if server else None
    ttft = ttft if ttft is not None else client_mean(case, "ttft_s")
    if server is None or queue is None or not ttft or queue <= max(QUEUE_SHARE * ttft, QUEUE_MIN_S):
        return None
    running = (server.get("gauges") or {}).get("running") or {}
    return {
        "queue_s": queue,
        "ttft_s": ttft,
        "queue_share": queue / ttft,
        "concurrency": case.get("concurrency"),
        "rate": case.get("rate"),
        "running_max": running.get("max"),
    }


def load_text(case: dict) -> str:
    """The case's load in words: a trace replay has arrivals, not a concurrency."""
    if case.get("kind") == "trace":
        return "the trace's arrival times"
    if case.get("rate") is not None:
        return f"{case['rate']:g} requests/s"
    return f"concurrency {case.get('concurrency')}"


def queue_hint(case: dict) -> str:
    """What lowers the queue for this case's kind of load: the flag that sets it."""
    if case.get("kind") == "trace":
        way = "replay the trace slower (--speed below 1) or cap it (--max-inflight)"
    elif case.get("rate") is not None:
        way = "lower --rate below what the server sustains"
    else:
        way = "lower the concurrency to the requests the server runs at once"
    return f"To measure prefill, {way}; or read this case as a capacity figure."


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


@dataclass(frozen=True)
class Finding:
    """One disagreement: checks.py turns it into a CheckWarning (severity warning)."""

    code: str
    message: str
    hint: str
    metrics: tuple[str, ...]  # the case's figures it qualifies
    details: dict
    evidence: list[tuple[str, float | None, float | None, str]] = field(
        default_factory=list
    )  # name, observed, threshold, unit


def findings(case: dict, setup: dict) -> Iterable[Finding]:
    """Every disagreement between the server's figures and the client's in the case."""
    found = cache_hit_finding(case, setup)
    if found:
        rate = found["server_cache_hit_rate"]
        seen = (
            "usage reported no cached_tokens, so only the server's metrics show it"
            if found["usage_cached_tokens"] is None
            else f"usage reported {found['usage_cached_tokens']} cached tokens"
        )
        yield Finding(
            "server_cache_hit",
            f"The server counted {found['server_cache_hits']:.0f} prefix-cache hit tokens"
            + (f" ({rate:.0%} of the prompt tokens)" if rate is not None else "")
            + f" during this case, more than the {found['explained_hits']:.0f} its chat template explains, "
            f"although every prompt was unique; {seen}. Cache busting failed: TTFT, prefill and "
            "end-to-end figures include work the server did not redo.",
            "Something before benchy's nonce is shared (a proxy or server cache keyed on part of the "
            "prompt?); compare with --no-nonce, or disable the server's prefix cache to measure cold prefill.",
            ("ttft_s", "prefill_tps", "e2e_tps"),
            found,
            [("server_cache_hits", found["server_cache_hits"], found["explained_hits"], "tokens")],
        )
    found = token_mismatch_finding(case)
    if found:
        yield Finding(
            "server_token_mismatch",
            f"The server's metrics counted {found['server_generation_tokens']:.0f} generated tokens for "
            f"this case's {found['requests']} requests; their responses' usage, which benchy's rates "
            f"count, adds up to {found['client_tokens']}. One of the two is wrong.",
            "Another client sharing the server during the run would explain extra tokens; otherwise "
            "the server counts tokens it did not stream (drafts, hidden text) or its usage is wrong.",
            ("e2e_tps", "decode_tps"),
            found,
            [
                ("server_generation_tokens", found["server_generation_tokens"], None, "tokens"),
                ("usage_completion_tokens", found["client_tokens"], None, "tokens"),
                ("token_difference", found["difference"], found["slack"], "tokens"),
            ],
        )
    found = outside_finding(case)
    if found:
        yield Finding(
            "ttft_outside_server",
            f"Client TTFT averaged {ms(found['client_ttft_s'])}, the server's own "
            f"{ms(found['server_ttft_s'])}: {ms(found['outside_s'])} passed outside the server, far "
            f"more than a round trip to it ({ms(found['rtt_s'])}): a proxy, the client or connection "
            "set-up holds it.",
            "Benchmark the server directly (not through a gateway), check client_overloaded, or keep "
            "connections alive.",
            ("ttft_s", "prefill_tps"),
            found,
            [
                ("ttft_outside_server_s", found["outside_s"], found["bound_s"], "s"),
                ("rtt_s", found["rtt_s"], None, "s"),
            ],
        )
    found = queue_finding(case)
    if found:
        yield Finding(
            "queue_dominates_ttft",
            f"At {load_text(case)}, requests waited {ms(found['queue_s'])} on average in the server's "
            f"queue, {found['queue_share']:.0%} of its {ms(found['ttft_s'])} TTFT: the server is "
            "saturated, and TTFT and prefill t/s hold queue time.",
            queue_hint(case),
            ("ttft_s", "prefill_tps"),
            found,
            [
                ("queue_share", found["queue_share"], QUEUE_SHARE, "fraction"),
                ("queue_s", found["queue_s"], QUEUE_MIN_S, "s"),
            ],
        )
