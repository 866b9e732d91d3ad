"""What the checks read of a case's every request, gathered in one pass over its rows.

A long case's rows live on disk (rows.py): each pass re-parses every line (about 33 µs a row),
and the checks, each iterating the case's requests on its own, made about 16 passes: a
200,000-request soak spent minutes between its last request and its exit. Each check's
question about the rows (which failed as empty output, which were served from a prefix
cache, the delivered token counts …) is answered here for all of them at once, into counts,
a few first examples and compact arrays of the numbers a check takes medians of; the checks
read these `CaseFacts` (results/types.py `CaseResult.facts`, gathered once per case, with its
rows, by a FactsTally; each read gives the gathered facts as a frozen CaseFacts) and decide
from them exactly as they did from the rows.

Only what depends on the rows alone is gathered here; what a check compares it with (the
chat template's tokens, the server's counters, the run's setup) stays in the check.
"""

from __future__ import annotations

from array import array
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from benchy.measure import evidence, unavailable
from benchy.measure.classify import OUTPUT_FAILURES
from benchy.measure.evidence import USAGE_ALONE
from benchy.records import Anomaly

# A row is a results.types.RequestResult, its token_count a TokenCountEntry: named, not
# imported (types.py imports this module; the house keeps imports free of circles).
RequestResult = Any
TokenCountEntry = Any


def context_served(cached: int | None, context: int) -> bool:
    """Cache blocks round down (vLLM 16 tokens, TensorRT-LLM up to 64), so allow a little."""
    return cached is not None and cached >= context - max(64, 0.1 * context)


def believed_tokens(req: RequestResult) -> int:
    """The completion count the figures use: usage, unless the stream contradicts it."""
    return req.token_count.tokens if req.token_count else int(req.completion_tokens or 0)


def ttft_and_prompt(req: RequestResult) -> tuple[float, float] | None:
    """(TTFT, the server's own prompt seconds) of a request with llama.cpp's timings."""
    ttft = req.metrics.get("ttft_s")
    prompt_ms = (req.server_timings or {}).get("prompt_ms")
    if ttft is None or not isinstance(prompt_ms, (int, float)):
        return None
    return ttft, prompt_ms / 1000


@dataclass(frozen=True)
class FailedAs:
    """The measured requests that failed as one output failure (classify.OUTPUT_FAILURES)."""

    count: int = 0
    claimed_tokens: list[int] = field(default_factory=list)  # completion_tokens (0 when none), each
    content_null_events: int = 0
    finish_reasons: set[str] = field(default_factory=set)  # str() of each


class _FailedTally:
    """FailedAs as it is gathered, row by row."""

    def __init__(self) -> None:
        self.count, self.content_null_events = 0, 0
        self.claimed_tokens: list[int] = []
        self.finish_reasons: set[str] = set()

    def add(self, r: RequestResult) -> None:
        self.count += 1
        self.claimed_tokens.append(r.completion_tokens or 0)
        self.content_null_events += r.content_null_events or 0
        self.finish_reasons.add(str(r.finish_reason))

    def made(self) -> FailedAs:
        return FailedAs(self.count, self.claimed_tokens, self.content_null_events, self.finish_reasons)


@dataclass(frozen=True)
class CaseFacts:
    """A case's rows as the checks judge them (see the module's doc). `measured`: not warmup
    (cold controls too); `ok`: measured and successful (CaseResult.measured_ok)."""

    n_measured: int = 0
    n_ok: int = 0
    first_errors: dict[str, str] = field(default_factory=dict)  # str(error_kind) → its first error, measured
    failed_as: dict[str, FailedAs] = field(default_factory=lambda: {k: FailedAs() for k in OUTPUT_FAILURES})
    # prefix_cache_hit: ok requests of no workload whose cached tokens pass their context by > 0.5
    cache_excess: list[int] = field(default_factory=list)  # cached − reused context
    cache_excess_cached: list[int] = field(default_factory=list)  # and their cached tokens
    # depth_cache_miss
    n_reusing: int = 0  # ok requests that reused a context sent ahead
    n_context_missed: int = 0  # of those, the ones the server did not serve it to
    missed_context: int = 0  # the first missed one's context
    missed_cached_known: bool = False  # some missed one reported cached tokens
    missed_cached_max: int = 0
    n_reasoning_only: int = 0
    n_without_tool_call: int = 0  # successful answers that held no tool call
    # output_length_mismatch: the believed count of each ok request with usage, and the short ones
    delivered: array[int] = field(default_factory=lambda: array("q"))
    n_short: int = 0
    short_finish_reasons: set[Any] = field(default_factory=set)
    n_usage_reported: int = 0  # ok requests with usage
    n_guessed: int = 0  # ok requests without usage whose count is an estimate (no_usage)
    # usage_mismatch
    n_doubted: int = 0
    first_doubted: TokenCountEntry | None = None
    doubted_usage: array[int] = field(default_factory=lambda: array("q"))
    doubted_tokens: array[int] = field(default_factory=lambda: array("q"))
    # local_tokenizer_mismatch
    n_local_odd: int = 0
    first_local_mismatch: str = ""
    local_ratios: array[float] = field(default_factory=lambda: array("d"))
    local_backed_by: set[str] = field(default_factory=set)
    # usage_unconfirmed: usage alone against a local count of its own (evidence.USAGE_ALONE)
    n_usage_alone: int = 0
    first_usage_alone: str = ""
    # prompt_length_mismatch
    n_prompt_missed: int = 0
    prompt_missed_tokens: array[int] = field(default_factory=lambda: array("q"))
    prompt_missed_target: int | None = None
    # A later turn's target is the middle of a window over the history it resends
    # (load/conversations._target_prompt): the first missed row's (low, high), None for a fitted prompt.
    prompt_missed_window: tuple[int, int] | None = None
    n_prompt_longer: int = 0  # of the missed: counted longer than sent
    # ttft_not_prefill, prefill_holds_queueing: (TTFT, server prompt s) of ok requests with timings
    pair_ttft: array[float] = field(default_factory=lambda: array("d"))
    pair_prompt_s: array[float] = field(default_factory=lambda: array("d"))
    # harmony_output
    n_stop_cut: int = 0  # measured requests a stop ended before any answer text
    n_stripped: int = 0
    # checks/server.py: each measured request's context sent ahead, and its cached / generated tokens
    reused_context: array[int] = field(default_factory=lambda: array("q"))
    usage_cached: int = 0
    n_usage_cached: int = 0
    all_ok_counted: bool = True  # every measured one succeeded with a completion count
    completion_sum: int = 0
    counted_sum: int = 0  # the counts the rates used (usage, or the witness that overruled it)


def _fresh(f: Field[Any]) -> Any:
    """A field's starting value: its default, or a new one from its factory."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


class FactsTally:
    """CaseFacts as RowScan's one pass gathers them, row by row (`add`): each field's value by
    its name, made into the frozen CaseFacts when it is read (`facts`), so no CaseFacts is
    written into after it is made."""

    def __init__(self) -> None:
        self.v: dict[str, Any] = {f.name: _fresh(f) for f in fields(CaseFacts) if f.name != "failed_as"}
        self.failed = {kind: _FailedTally() for kind in OUTPUT_FAILURES}

    def facts(self) -> CaseFacts:
        return CaseFacts(**self.v, failed_as={kind: t.made() for kind, t in self.failed.items()})

    def add(self, r: RequestResult) -> None:
        if r.warmup:
            return
        v = self.v
        v["n_measured"] += 1
        self._measured(r)
        if r.ok:
            v["n_ok"] += 1
            self._ok(r)

    def _measured(self, r: RequestResult) -> None:
        v = self.v
        kind = r.error_kind
        if kind is not None and str(kind) not in v["first_errors"]:
            v["first_errors"][str(kind)] = (r.error or "")[:300]
        if kind in self.failed:
            self.failed[kind].add(r)
        if r.finish_reason == "stop" and not r.content_chars and not r.tool_chars and kind in (None,) + OUTPUT_FAILURES:
            v["n_stop_cut"] += 1
        v["reused_context"].append(r.reused_context_tokens or 0)
        if r.cached_tokens is not None:
            v["usage_cached"] += r.cached_tokens
            v["n_usage_cached"] += 1
        if r.status != "ok" or r.completion_tokens is None:
            v["all_ok_counted"] = False
        else:
            v["completion_sum"] += r.completion_tokens
            v["counted_sum"] += r.token_count.tokens if r.token_count is not None else r.completion_tokens

    def _ok(self, r: RequestResult) -> None:
        v = self.v
        self._cache(r)
        no_answer = not r.content_chars and not r.tool_chars  # a tool call is an answer
        if (no_answer and r.reasoning_chars) or r.unavailable_codes.get("ttfc_s") in unavailable.THINK_ONLY:
            v["n_reasoning_only"] += 1
        if not r.tool_calls:
            v["n_without_tool_call"] += 1
        self._counts(r)
        if r.unavailable_codes.get("prefill_tps") == unavailable.PROMPT_LENGTH_MISSED:
            if not v["n_prompt_missed"]:
                v["prompt_missed_target"] = r.target_prompt_tokens
                v["prompt_missed_window"] = evidence.history_window(
                    r.turn, r.control, r.target_prompt_tokens, r.prompt_slack
                )
            v["n_prompt_missed"] += 1
            v["prompt_missed_tokens"].append(r.prompt_tokens or 0)
            v["n_prompt_longer"] += (r.prompt_tokens or 0) > (r.target_prompt_tokens or 0)
        pair = ttft_and_prompt(r)
        if pair:
            v["pair_ttft"].append(pair[0])
            v["pair_prompt_s"].append(pair[1])
        if Anomaly.SPECIAL_TOKENS_STRIPPED in r.anomalies:
            v["n_stripped"] += 1

    def _cache(self, r: RequestResult) -> None:
        v = self.v
        excess = (r.cached_tokens or 0) - (r.reused_context_tokens or 0)
        if r.unique_tokens is None and excess > 0.5:  # a hit needs more than the template + 0.5
            v["cache_excess"].append(excess)
            v["cache_excess_cached"].append(r.cached_tokens or 0)
        if r.reused_context_tokens:
            v["n_reusing"] += 1
            if not context_served(r.cached_tokens, r.reused_context_tokens):
                if not v["n_context_missed"]:
                    v["missed_context"] = r.reused_context_tokens
                v["n_context_missed"] += 1
                v["missed_cached_known"] |= r.cached_tokens is not None
                v["missed_cached_max"] = max(v["missed_cached_max"], r.cached_tokens or 0)

    def _counts(self, r: RequestResult) -> None:
        """The completion count's witnesses: usage, short outputs, estimates, disagreements."""
        v = self.v
        if r.usage_reported:
            v["n_usage_reported"] += 1
            v["delivered"].append(believed_tokens(r))
            if v["delivered"][-1] < r.target_output_tokens:
                v["n_short"] += 1
                v["short_finish_reasons"].add(r.finish_reason)
        elif r.token_count is None or r.token_count.estimate:
            v["n_guessed"] += 1
        c = r.token_count
        if c is None:
            return
        if c.mismatch:
            if v["first_doubted"] is None:
                v["first_doubted"] = c
            v["n_doubted"] += 1
            v["doubted_usage"].append(c.usage or 0)
            v["doubted_tokens"].append(c.tokens)
        if c.local_mismatch and c.local_mismatch.startswith(USAGE_ALONE):
            if not v["n_usage_alone"]:
                v["first_usage_alone"] = c.local_mismatch
            v["n_usage_alone"] += 1
        elif c.local_mismatch and c.local is not None:
            if not v["n_local_odd"]:
                v["first_local_mismatch"] = c.local_mismatch
            v["n_local_odd"] += 1
            if c.tokens:
                v["local_ratios"].append((c.local or 0.0) / c.tokens)
            v["local_backed_by"].update(c.backed_by)
