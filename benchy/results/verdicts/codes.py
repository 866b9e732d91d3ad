"""Every warning code benchy can emit, closed: a check yields a `Code`, never a bare string,
and each code has one entry in VERDICTS: its severity rule, its class of figures
(verdicts/details.py) and the metrics its warning qualifies or withholds, named as the metric
registry names them (a name that is no metric fails the import).
tests/test_codes.py holds the set closed both ways (every code a check yields is here, every
code here has a check that yields it) and docs/checks.md's table equal to it, so a reader of
results.json can rely on the list."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from benchy.measure.registry import METRICS, STREAM_TIMING_METRICS, TABLE_METRICS
from benchy.measure.steady import STEADY_METRICS
from benchy.results.verdicts import details as payloads

# A warning's severity: the number is wrong or missing (a hard failure); real but qualified;
# worth knowing, the numbers right (never fatal, even under --strict).
ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = (ERROR, WARNING, INFO)


class Code(str, Enum):
    """A warning's stable code, as results.json writes it."""

    SSE_BUFFERING = "sse_buffering"
    ABOVE_BANDWIDTH_CEILING = "above_bandwidth_ceiling"
    CEILING_UNKNOWN = "ceiling_unknown"
    HARDWARE_CONTRADICTED = "hardware_contradicted"
    PREFIX_CACHE_HIT = "prefix_cache_hit"
    DEPTH_CACHE_MISS = "depth_cache_miss"
    CACHE_EVICTION = "cache_eviction"
    CACHE_NOT_REUSED = "cache_not_reused"
    CACHE_PARTIAL_REUSE = "cache_partial_reuse"
    CACHE_RESET_UNAVAILABLE = "cache_reset_unavailable"
    CACHE_NOT_REPORTED = "cache_not_reported"
    CACHE_LEAKAGE = "cache_leakage"
    EMPTY_OUTPUT = "empty_output"
    ZERO_TOKENS = "zero_tokens"
    REASONING_ONLY = "reasoning_only"
    TOOL_CHOICE_IGNORED = "tool_choice_ignored"
    OUTPUT_LENGTH_MISMATCH = "output_length_mismatch"
    NO_USAGE = "no_usage"
    USAGE_MISMATCH = "usage_mismatch"
    LOCAL_TOKENIZER_MISMATCH = "local_tokenizer_mismatch"
    USAGE_UNCONFIRMED = "usage_unconfirmed"
    PROMPT_LENGTH_MISMATCH = "prompt_length_mismatch"
    TTFT_NOT_PREFILL = "ttft_not_prefill"
    PREFILL_HOLDS_QUEUEING = "prefill_holds_queueing"
    FIXED_LATENCY = "fixed_latency"
    RATE_DRIFT = "rate_drift"
    RATE_DRIFT_ACROSS_CASES = "rate_drift_across_cases"
    REQUEST_ERRORS = "request_errors"
    CLIENT_OVERLOADED = "client_overloaded"
    CLIENT_BOUND = "client_bound"
    STEADY_STATE_DIFFERS = "steady_state_differs"
    GPU_SAMPLES_FAILED = "gpu_samples_failed"
    GPU_IDLE_DOMINATES = "gpu_idle_dominates"
    CASE_CUT_SHORT = "case_cut_short"
    FIRST_CHUNK_BEFORE_PREFILL = "first_chunk_before_prefill"
    DANGEROUS_STOP = "dangerous_stop"
    SPECIAL_TOKENS_STRIPPED = "special_tokens_stripped"
    SATURATED = "saturated"
    RATE_KNEE = "rate_knee"
    SERVER_CACHE_HIT = "server_cache_hit"
    SERVER_TOKEN_MISMATCH = "server_token_mismatch"
    TTFT_OUTSIDE_SERVER = "ttft_outside_server"
    QUEUE_DOMINATES_TTFT = "queue_dominates_ttft"
    SERVER_COUNTER_RESET = "server_counter_reset"
    SERVER_SEVERAL_PROCESSES = "server_several_processes"
    OUTPUT_GARBAGE = "output_garbage"
    CANARY_FAILED = "canary_failed"

    def __str__(self) -> str:
        return self.value

    @property
    def rule(self) -> Rule:
        return VERDICTS[self].rule

    @property
    def details(self) -> type[payloads.Details]:
        """The class of the figures a warning of this code carries."""
        return VERDICTS[self].details

    def allows(self, severity: str) -> bool:
        """Whether a warning of this code may have `severity` (its rule's)."""
        return severity == self.rule.severity or (self.rule.error_when_most_failed and severity == ERROR)


@dataclass(frozen=True)
class Rule:
    """A code's severity: `severity`, or an error where most requests of the case failed."""

    severity: str
    error_when_most_failed: bool = False

    def words(self) -> str:
        """As docs/checks.md's table says it."""
        return (
            f"{self.severity}, error if most requests of the case failed"
            if self.error_when_most_failed
            else self.severity
        )


_WARNING = Rule(WARNING)
_FAILURE = Rule(WARNING, error_when_most_failed=True)


@dataclass(frozen=True)
class Verdict:
    """What a code is: its severity rule, the class of the figures it carries, and the metrics
    its warning names: those it qualifies (the table marks them) and those the analysis makes
    unavailable for its reason. A warning names these, or (where the evidence picks) some of them."""

    rule: Rule
    details: type[payloads.Details]
    qualifies: tuple[str, ...] = ()
    withholds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [name for name in (*self.qualifies, *self.withholds) if name not in METRICS]
        if unknown:
            raise ValueError(f"verdict table: {', '.join(unknown)}: no metric of the registry")


# Each a class of figures that one cause moves, named once for the codes that share it.
COUNTED_METRICS = ("e2e_tps", "decode_tps", "itl_s", "tokens_per_event")  # built on the token count
DRIFT_METRICS = ("decode_tps", "e2e_tps")  # the rates a throttling GPU moves
ACROSS_METRICS = ("decode_tps",)  # e2e holds prefill, which a cached context moves between such cases
_CACHED = ("ttft_s", "prefill_tps")  # what a prompt cache, or a wait before the prompt is read, moves


# Every code: its severity rule, its figures and the metrics it names (tests/test_codes.py: no code left out).
VERDICTS: dict[Code, Verdict] = {
    Code.SSE_BUFFERING: Verdict(_WARNING, payloads.SseBuffering, withholds=STREAM_TIMING_METRICS),
    Code.ABOVE_BANDWIDTH_CEILING: Verdict(Rule(ERROR), payloads.AboveBandwidthCeiling, ("decode_tps", "e2e_tps")),
    Code.CEILING_UNKNOWN: Verdict(_WARNING, payloads.NoFigures),
    Code.HARDWARE_CONTRADICTED: Verdict(_WARNING, payloads.NoFigures),
    Code.PREFIX_CACHE_HIT: Verdict(_WARNING, payloads.PrefixCacheHit, (*_CACHED, "e2e_tps")),
    Code.DEPTH_CACHE_MISS: Verdict(_WARNING, payloads.NoFigures),
    Code.CACHE_EVICTION: Verdict(_WARNING, payloads.CacheEviction, _CACHED),
    Code.CACHE_NOT_REUSED: Verdict(_WARNING, payloads.CacheNotReused, _CACHED),
    Code.CACHE_PARTIAL_REUSE: Verdict(_WARNING, payloads.CachePartialReuse, _CACHED),
    Code.CACHE_RESET_UNAVAILABLE: Verdict(_WARNING, payloads.CacheResetUnavailable),
    Code.CACHE_NOT_REPORTED: Verdict(_WARNING, payloads.RequestCount),
    Code.CACHE_LEAKAGE: Verdict(_WARNING, payloads.CacheLeakage, _CACHED),
    Code.EMPTY_OUTPUT: Verdict(_FAILURE, payloads.EmptyOutput),
    Code.ZERO_TOKENS: Verdict(_FAILURE, payloads.ZeroTokens),
    Code.REASONING_ONLY: Verdict(_WARNING, payloads.RequestCount, ("ttfc_s",)),
    Code.TOOL_CHOICE_IGNORED: Verdict(_WARNING, payloads.RequestCount, ("ttftc_s",)),
    Code.OUTPUT_LENGTH_MISMATCH: Verdict(_WARNING, payloads.OutputLengthMismatch, ("e2e_tps", "decode_tps")),
    Code.NO_USAGE: Verdict(_WARNING, payloads.NoUsage, COUNTED_METRICS),
    Code.USAGE_MISMATCH: Verdict(_WARNING, payloads.UsageMismatch, COUNTED_METRICS),
    Code.LOCAL_TOKENIZER_MISMATCH: Verdict(Rule(INFO), payloads.LocalTokenizerMismatch),
    Code.USAGE_UNCONFIRMED: Verdict(_WARNING, payloads.RequestCount, COUNTED_METRICS),
    Code.PROMPT_LENGTH_MISMATCH: Verdict(
        _WARNING, payloads.PromptLengthMismatch, ("ttft_s", "e2e_tps", "e2e_s"), withholds=("prefill_tps",)
    ),
    Code.TTFT_NOT_PREFILL: Verdict(_WARNING, payloads.TtftNotPrefill, ("prefill_tps", "ttft_s")),
    Code.PREFILL_HOLDS_QUEUEING: Verdict(
        _WARNING, payloads.PrefillHoldsQueueing, ("prefill_tps", "ttft_s"), withholds=("prefill_tps",)
    ),
    Code.FIXED_LATENCY: Verdict(_WARNING, payloads.FixedLatency, ("ttft_s",), withholds=("prefill_tps",)),
    Code.RATE_DRIFT: Verdict(_WARNING, payloads.RateDrift, DRIFT_METRICS),
    Code.RATE_DRIFT_ACROSS_CASES: Verdict(_WARNING, payloads.RateDriftAcrossCases, ACROSS_METRICS),
    Code.REQUEST_ERRORS: Verdict(_FAILURE, payloads.RequestErrors),
    Code.CLIENT_OVERLOADED: Verdict(
        _WARNING, payloads.ClientOverloaded, ("ttft_s", "decode_tps", "itl_s", "prefill_tps")
    ),
    Code.CLIENT_BOUND: Verdict(
        _WARNING, payloads.NoFigures, ("ttft_s", "itl_s", "e2e_s", "request_rate", "aggregate_tps")
    ),
    Code.STEADY_STATE_DIFFERS: Verdict(_WARNING, payloads.NoFigures, STEADY_METRICS),
    Code.GPU_SAMPLES_FAILED: Verdict(_WARNING, payloads.NoFigures),
    Code.GPU_IDLE_DOMINATES: Verdict(Rule(INFO), payloads.NoFigures),
    Code.CASE_CUT_SHORT: Verdict(
        _WARNING,
        payloads.CaseCutShort,
        tuple(m.name for m in TABLE_METRICS),
        withholds=("aggregate_tps", "request_rate"),
    ),
    Code.FIRST_CHUNK_BEFORE_PREFILL: Verdict(Rule(INFO), payloads.FirstChunkBeforePrefill, ("ttft_s",)),
    Code.DANGEROUS_STOP: Verdict(_FAILURE, payloads.DangerousStopFound, ("e2e_tps", "ttfc_s")),
    Code.SPECIAL_TOKENS_STRIPPED: Verdict(_WARNING, payloads.RequestCount, withholds=("ttfc_s",)),
    Code.RATE_KNEE: Verdict(Rule(INFO), payloads.NoFigures),
    Code.SATURATED: Verdict(_WARNING, payloads.RequestCount, ("ttft_s", "e2e_s", "aggregate_tps")),
    Code.SERVER_CACHE_HIT: Verdict(_WARNING, payloads.ServerCacheHit, (*_CACHED, "e2e_tps")),
    Code.SERVER_TOKEN_MISMATCH: Verdict(_WARNING, payloads.ServerTokenMismatch, ("e2e_tps", "decode_tps")),
    Code.TTFT_OUTSIDE_SERVER: Verdict(_WARNING, payloads.TtftOutsideServer, _CACHED),
    Code.QUEUE_DOMINATES_TTFT: Verdict(_WARNING, payloads.QueueDominatesTtft, _CACHED),
    Code.SERVER_COUNTER_RESET: Verdict(_WARNING, payloads.ServerCounterReset),
    Code.SERVER_SEVERAL_PROCESSES: Verdict(_WARNING, payloads.NoFigures),
    Code.OUTPUT_GARBAGE: Verdict(_WARNING, payloads.OutputGarbage, ("e2e_tps", "decode_tps", "aggregate_tps")),
    Code.CANARY_FAILED: Verdict(_WARNING, payloads.CanaryFailed),
}


def details_class(code: str | None) -> type[payloads.Details]:
    """The figures' class of a warning of `code`, as read from a file; a code this benchy does
    not emit (a file's own) reads as no figures."""
    try:
        return VERDICTS[Code(code)].details
    except ValueError:
        return payloads.NoFigures


def details_by_code() -> dict[str, type[payloads.Details]]:
    """Each code's class of figures, by the code as files write it (the schema pins them)."""
    return {code.value: verdict.details for code, verdict in VERDICTS.items()}
