"""Every warning code benchy can emit, closed: a check yields a `Code`, never a bare string, and
each code has one severity rule. tests/test_codes.py holds the set closed both ways (every code
a check yields is here, every code here has a check that yields it) and docs/checks.md's table
equal to it, so a reader of results.json can rely on the list."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# A warning's severity: the number is wrong or missing (a hard failure); real but qualified;
# worth knowing, the numbers right (never fatal, even under --strict).
ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = (ERROR, WARNING, INFO)


class Code(str, Enum):
    """A warning's stable code, as results.json writes it."""

    SSE_BUFFERING = "sse_buffering"
    ABOVE_BANDWIDTH_CEILING = "above_bandwidth_ceiling"
    CEILING_UNKNOWN = "ceiling_unknown"
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
    OUTPUT_LENGTH_MISMATCH = "output_length_mismatch"
    NO_USAGE = "no_usage"
    USAGE_MISMATCH = "usage_mismatch"
    LOCAL_TOKENIZER_MISMATCH = "local_tokenizer_mismatch"
    PROMPT_LENGTH_MISMATCH = "prompt_length_mismatch"
    TTFT_NOT_PREFILL = "ttft_not_prefill"
    PREFILL_HOLDS_QUEUEING = "prefill_holds_queueing"
    FIXED_LATENCY = "fixed_latency"
    RATE_DRIFT = "rate_drift"
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
    SERVER_CACHE_HIT = "server_cache_hit"
    SERVER_TOKEN_MISMATCH = "server_token_mismatch"
    TTFT_OUTSIDE_SERVER = "ttft_outside_server"
    QUEUE_DOMINATES_TTFT = "queue_dominates_ttft"

    def __str__(self) -> str:
        return self.value

    @property
    def rule(self) -> Rule:
        return RULES.get(self, _PLAIN_WARNING)

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


_PLAIN_WARNING = Rule(WARNING)
_FAILURE = Rule(WARNING, error_when_most_failed=True)
# The codes whose rule is not a plain warning.
RULES: dict[Code, Rule] = {
    Code.ABOVE_BANDWIDTH_CEILING: Rule(ERROR),
    Code.EMPTY_OUTPUT: _FAILURE,
    Code.ZERO_TOKENS: _FAILURE,
    Code.REQUEST_ERRORS: _FAILURE,
    Code.DANGEROUS_STOP: _FAILURE,
    Code.LOCAL_TOKENIZER_MISMATCH: Rule(INFO),
    Code.GPU_IDLE_DOMINATES: Rule(INFO),
    Code.FIRST_CHUNK_BEFORE_PREFILL: Rule(INFO),
}
