"""Where the server's account of a case disagrees with the client's (issue 17): checks of the
one registry (checks/registry.py), each a typed warning with the figures of both sides. They
read saved results only (the case's `server` entry, from /metrics, beside its requests), like
every check; checks/warnings.py registers them in its order. Each reads a case's requests
once, a request at a time (a long case's are on disk: results/rows.py). Each is a class
(checks/check.py); the detect of the first three is its figures function (cache_hit_figures,
token_mismatch_figures, outside_figures), kept apart because tests judge the figures alone.

  server_cache_hit      the server counted prefix-cache hits beyond what the chat template
                        (and a context sent ahead) explains, in a case whose prompts were all
                        unique: cache busting failed, and TTFT and prefill hold cached work.
  server_token_mismatch the server generated a different number of tokens than the client
                        counted for the same requests.
  ttft_outside_server   the client's TTFT exceeds the server's own by far more than a round
                        trip to it; the words name what the evidence shows holds the rest:
                        benchy (its loop or send lag), the server that stopped (every stream
                        mid-answer silent at once, benchy awake) or something in front of it.
  server_counter_reset  the server's counters fell back during the case (it restarted): counted
                        over every scrape as rate() does, what it counted just before is lost.
  server_several_processes  the scrapes answer for several processes behind one address: the
                        server view covers one a scrape, its counts are withheld.
  queue_dominates_ttft  most of the server's TTFT was queueing: the server is saturated at
                        this concurrency, and TTFT and prefill t/s hold queue time (the
                        queueing trap's checks/queueing.py words it).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchy.checks import queueing, tool_frame
from benchy.checks.check import Check
from benchy.checks.registry import Code, Warning_
from benchy.measure.silence import Silence
from benchy.results.stop import AWAKE_SHARE, long_silence, loop_peak_s, server_stop
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
)
from benchy.results.verdicts.details import (
    NoFigures,
    ServerCacheHit,
    ServerCounterReset,
    ServerTokenMismatch,
    TtftOutsideServer,
)
from benchy.results.view import RunView

# Tokens a request may legitimately find cached beyond its template: vLLM's cache blocks are 16
# tokens, so a template prefix rounds to a block either way.
CACHE_BLOCK_SLACK = 16
# Generated tokens may differ by one a request (a server counting an end token) and 2% in all.
TOKEN_SLACK_PER_REQUEST, TOKEN_SLACK_SHARE = 1, 0.02
# TTFT outside the server: more than this, this many round trips, and this share of TTFT.
OUTSIDE_MIN_S, OUTSIDE_RTTS, OUTSIDE_SHARE = 0.02, 3.0, 0.2


def cache_hit_figures(case: CaseResult, run: RunView) -> ServerCacheHit | None:
    """The figures of a server_cache_hit warning, or None (prompts not unique, or hits explained)."""
    if case.kind != "sweep":
        return None  # a cache-aware workload means to hit; its own checks judge its reuse
    server = case.server_figures()
    hits = server.counters.get("cache_hits") if server else None
    if server is None or not run.setup.prompt_nonce or hits is None:
        return None
    template = run.setup.calibration.overhead_tokens if run.setup.calibration else 0.0
    facts = case.facts()  # the measured requests' contexts and cached tokens, gathered once
    n, n_cached, cached = facts.n_measured, facts.n_usage_cached, facts.usage_cached
    allowed = sum((template + CACHE_BLOCK_SLACK + reused for reused in facts.reused_context), 0.0)
    if hits <= allowed:
        return None
    return ServerCacheHit(
        server_cache_hits=hits,
        explained_hits=allowed,
        server_cache_hit_rate=server.derived.get("cache_hit_rate"),
        requests=n,
        usage_cached_tokens=cached if n_cached == n else None,
    )


def token_mismatch_figures(case: CaseResult) -> ServerTokenMismatch | None:
    """The figures of a server_token_mismatch warning, or None. Only when every measured request
    succeeded: a failed one may have generated tokens the client never saw."""
    server = case.server_figures()
    generated = server.counters.get("generation_tokens") if server else None
    if generated is None or server is None or server.counter_resets:
        return None  # after a reset the view may fall short: server_counter_reset says so
    facts = case.facts()
    # a failed one, or one without usage (the client's count is a floor: no_usage says so)
    if not facts.all_ok_counted:
        return None
    n, client = facts.n_measured, facts.completion_sum
    slack = max(TOKEN_SLACK_PER_REQUEST * n, TOKEN_SLACK_SHARE * client)
    if not n or abs(generated - client) <= slack:
        return None
    return ServerTokenMismatch(
        server_generation_tokens=generated,
        client_tokens=client,
        counted_tokens=facts.counted_sum,
        requests=n,
        difference=abs(generated - client),
        slack=slack,
    )


def outside_figures(case: CaseResult) -> TtftOutsideServer | None:
    """The figures of a ttft_outside_server warning, or None."""
    server = case.server_figures()
    server_ttft = server.histogram_mean("ttft_s") if server else None
    client_ttft = case.mean("ttft_s")
    if server is None or server_ttft is None or client_ttft is None:
        return None
    gap, rtt = client_ttft - server_ttft, server.rtt_s or 0.0
    frame = tool_frame.frame_s(case)  # tokens the server made before a call's name could leave
    bound = max(OUTSIDE_MIN_S, OUTSIDE_RTTS * rtt) + frame
    if gap <= bound or gap - frame <= OUTSIDE_SHARE * client_ttft:
        return None
    lag = client_lag_s(case)
    cause, silence = _outside_evidence(case, gap - frame, lag)
    return TtftOutsideServer(
        client_ttft_s=client_ttft,
        server_ttft_s=server_ttft,
        outside_s=gap,
        rtt_s=rtt,
        bound_s=bound,
        cause=cause,
        silence_s=silence.silence_s if silence else None,
        silent_streams=silence.streams if silence else None,
        unread=silence.unread if silence else None,
        client_lag_s=lag,
        loop_peak_s=loop_peak_s(case),
    )


# benchy itself holds the gap when its own lateness is at least this share of it.
CLIENT_SHARE = 0.5


def _outside_evidence(case: CaseResult, gap: float, lag: float) -> tuple[str, Silence | None]:
    """What holds a TTFT gap of `gap` s, by the evidence: "server_stopped" (with its silence),
    "client" or "in_front"."""
    stop = server_stop(case)
    if stop is not None:
        return "server_stopped", stop  # whatever benchy's lag elsewhere: this silence was not its own
    silence, peak = long_silence(case), loop_peak_s(case)
    asleep = silence is not None and peak >= AWAKE_SHARE * silence.silence_s
    slept = peak if asleep else 0.0  # benchy stalled through the silence
    if max(lag, slept) >= CLIENT_SHARE * gap:
        return "client", None  # late for much of the case, or stalled through the silence
    return "in_front", None


def client_lag_s(case: CaseResult) -> float:
    """benchy's own sustained lateness in the case: its event loop's p95 lag, or its sends' p90
    lag behind their schedule (an open loop), the larger, s. A mean gap over every request is
    benchy's only if benchy was late for many of them, not at one peak (212 ms seen once on a
    busy host, against a proxy's steady 150 ms)."""
    loop = (case.client.loop_lag_ms_p95 or 0.0) / 1000 if case.client else 0.0
    sends = case.send_lag.p90 if case.send_lag and case.send_lag.p90 is not None else 0.0
    return max(loop, sends)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _num(value: float | int | None) -> float:
    """A figure its check has set (a warning's figures are optional: files may lack any)."""
    assert value is not None
    return float(value)


class ServerCacheHitCheck(Check[ServerCacheHit]):
    code = Code.SERVER_CACHE_HIT

    def detect(self, case: CaseResult, run: RunView) -> ServerCacheHit | None:
        return cache_hit_figures(case, run)

    def words(self, case: CaseResult, found: ServerCacheHit) -> CheckWarning:
        rate = found.server_cache_hit_rate
        seen = (
            "usage reported no cached_tokens, so only the server's metrics show it"
            if found.usage_cached_tokens is None
            else f"usage reported {found.usage_cached_tokens} cached tokens"
        )
        return Warning_(
            Code.SERVER_CACHE_HIT,
            self.severity,
            case.label,
            f"The server counted {_num(found.server_cache_hits):.0f} prefix-cache hit tokens"
            + (f" ({rate:.0%} of the prompt tokens)" if rate is not None else "")
            + f" during this case, more than the {_num(found.explained_hits):.0f} its chat template explains, "
            f"although every prompt was unique; {seen}. Cache busting failed: TTFT, prefill and "
            "end-to-end figures include work the server did not redo.",
            "Something before benchy's nonce is shared (a proxy or server cache keyed on part of the "
            "prompt?); compare with --no-nonce, or disable the server's prefix cache to measure cold prefill.",
            details=found,
            evidence=(Evidence("server_cache_hits", found.server_cache_hits, found.explained_hits, "tokens"),),
        )


server_cache_hit = ServerCacheHitCheck()  # registered by this name (checks/warnings.py)


class ServerTokenMismatchCheck(Check[ServerTokenMismatch]):
    code = Code.SERVER_TOKEN_MISMATCH

    def detect(self, case: CaseResult, run: RunView) -> ServerTokenMismatch | None:
        return token_mismatch_figures(case)

    def words(self, case: CaseResult, found: ServerTokenMismatch) -> CheckWarning:
        return Warning_(
            Code.SERVER_TOKEN_MISMATCH,
            self.severity,
            case.label,
            f"The server's metrics counted {_num(found.server_generation_tokens):.0f} generated tokens for "
            f"this case's {found.requests} requests; their responses' usage adds up to {found.client_tokens}"
            f"{_what_rates_count(found)}",
            "Another client sharing the server during the run would explain extra tokens; otherwise "
            "the server counts tokens it did not stream (drafts, hidden text) or its usage is wrong.",
            details=found,
            evidence=(
                Evidence("server_generation_tokens", found.server_generation_tokens, None, "tokens"),
                Evidence("usage_completion_tokens", found.client_tokens, None, "tokens"),
                Evidence("token_difference", found.difference, found.slack, "tokens"),
            ),
        )


server_token_mismatch = ServerTokenMismatchCheck()  # registered by this name (checks/warnings.py)


def _what_rates_count(found: ServerTokenMismatch) -> str:
    """The sentence's end: what benchy's rates counted, in the words of what it was. Where usage
    was overruled (usage_mismatch) the rates count the stream, and the server's own count may
    side with it."""
    counted, usage = found.counted_tokens, found.client_tokens
    if counted is None or counted == usage:
        return ", which benchy's rates count. One of the two is wrong."
    generated, slack = _num(found.server_generation_tokens), _num(found.slack)
    verdict = (
        "The server's count sides with the stream: its usage is what is wrong."
        if abs(generated - counted) <= slack
        else "The server's count agrees with neither."
    )
    return (
        f", but usage was overruled where the stream's witnesses agreed against it (usage_mismatch): "
        f"benchy's rates count {counted}. {verdict}"
    )


class TtftOutsideServerCheck(Check[TtftOutsideServer]):
    code = Code.TTFT_OUTSIDE_SERVER

    def detect(self, case: CaseResult, run: RunView) -> TtftOutsideServer | None:
        return outside_figures(case)

    def words(self, case: CaseResult, found: TtftOutsideServer) -> CheckWarning:
        said, hint = _outside_cause(found)
        return Warning_(
            Code.TTFT_OUTSIDE_SERVER,
            self.severity,
            case.label,
            f"Client TTFT averaged {ms(_num(found.client_ttft_s))}, the server's own "
            f"{ms(_num(found.server_ttft_s))}: {ms(_num(found.outside_s))} passed outside the server's own "
            f"account, far more than a round trip to it ({ms(_num(found.rtt_s))}): {said}",
            hint,
            details=found,
            evidence=(
                Evidence("ttft_outside_server_s", found.outside_s, found.bound_s, "s"),
                Evidence("rtt_s", found.rtt_s, None, "s"),
                Evidence("client_lag_s", found.client_lag_s, None, "s"),
                *((Evidence("server_silence_s", found.silence_s, None, "s"),) if found.silence_s is not None else ()),
            ),
        )


ttft_outside_server = TtftOutsideServerCheck()  # registered by this name (checks/warnings.py)


def _outside_cause(found: TtftOutsideServer) -> tuple[str, str]:
    """(what holds it, in words that name only what the evidence shows; the hint)."""
    lag, peak = ms(_num(found.client_lag_s)), ms(_num(found.loop_peak_s))
    if found.cause == "client":
        return (
            f"benchy itself held it (its event loop stalled up to {peak}; it, or its sends, were {lag} late at "
            "their 95th percentile).",
            "Check client_overloaded; lower the load on this host, or spread the load (--workers).",
        )
    if found.cause == "server_stopped":
        return (
            f"the server stopped answering: for {ms(_num(found.silence_s))} nothing came on any of the "
            f"{found.silent_streams} streams mid-answer and {found.unread} requests sent meanwhile got their "
            f"response headers only after it, while benchy's own loop lagged at most {peak}: they waited unread "
            "(a frozen process: a GC pause, a synchronous step in its API server); its own TTFT starts when it "
            "reads them.",
            "Look at the server's logs and its process around that moment; its latency figures leave that wait out.",
        )
    return (
        f"something in front of the server holds requests (a proxy, a gateway, connection set-up): benchy was "
        f"late by {lag} at its 95th percentile and no stream mid-answer fell silent.",
        "Benchmark the server directly (not through a gateway), or keep connections alive.",
    )


@dataclass(frozen=True)
class Restarted:
    """The counters' resets, what the server and benchy counted, and whether requests were cut or
    refused meanwhile (a restart cuts those in flight and refuses the next)."""

    figures: ServerCounterReset
    cut: bool


class ServerCounterResetCheck(Check[Restarted]):
    code = Code.SERVER_COUNTER_RESET

    def detect(self, case: CaseResult, run: RunView) -> Restarted | None:
        server = case.server_figures()
        n = server.counter_resets if server else 0
        if server is None or not n:
            return None
        facts = case.facts()
        cut = any(kind in facts.first_errors for kind in ("connect", "reset", "disconnect"))
        counted = server.derived.get("requests")
        return Restarted(ServerCounterReset(counter_resets=n, server_requests=counted, requests=facts.n_measured), cut)

    def words(self, case: CaseResult, found: Restarted) -> CheckWarning:
        n, counted = found.figures.counter_resets, found.figures.server_requests
        resets = f"{n} counter reset{'s' if n != 1 else ''}"
        # without a request cut or refused, not this server's restart
        why = (
            "the server restarted: requests were cut or refused"
            if found.cut
            else "though no request was cut or refused: not a restart of the server benchy measured; several "
            "processes behind this address answering the scrapes in turn would do it"
        )
        return Warning_(
            Code.SERVER_COUNTER_RESET,
            self.severity,
            case.label,
            f"The server's /metrics counters fell back during this case ({resets}, {why}). "
            "benchy added them up over its scrapes as Prometheus' rate() does"
            + (f" ({counted:.0f} requests counted for {found.figures.requests} sent)" if counted is not None else "")
            + "; what the server counted after the last scrape before a reset is lost, so its view of "
            "this case may fall short. Statistics from /metrics may be inaccurate.",
            "A restarted server also lost its caches: compare this case with the others; request_errors counts "
            "the requests the restart cut or refused.",
            details=found.figures,
            evidence=(Evidence("counter_resets", found.figures.counter_resets, 0, "resets"),),
        )


server_counter_reset = ServerCounterResetCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class SeveralProcesses:
    """Why the scrapes answer for several processes (the server view's own words)."""

    why: str


class ServerSeveralProcessesCheck(Check[SeveralProcesses]):
    code = Code.SERVER_SEVERAL_PROCESSES

    def detect(self, case: CaseResult, run: RunView) -> SeveralProcesses | None:
        server = case.server_figures()
        why = server.several_processes if server else None
        return SeveralProcesses(why) if why is not None else None

    def words(self, case: CaseResult, found: SeveralProcesses) -> CheckWarning:
        return Warning_(
            Code.SERVER_SEVERAL_PROCESSES,
            self.severity,
            case.label,
            f"/metrics at this address answers for one of several server processes or replicas a scrape ({found.why}): "
            "the server view covers one of them at a time, so benchy withholds its counts and histograms for "
            "this case rather than compare them with the responses.",
            "Name each replica's address (--replica URL, repeated) to have each one's /metrics scraped and added up, "
            "or have the processes share their metrics (vLLM: PROMETHEUS_MULTIPROC_DIR).",
            details=NoFigures(),
        )


server_several_processes = ServerSeveralProcessesCheck()  # registered by this name (checks/warnings.py)


CASE_CHECKS = (
    server_cache_hit,
    server_token_mismatch,
    ttft_outside_server,
    queueing.queue_dominates_ttft,
    server_counter_reset,
    server_several_processes,
)
