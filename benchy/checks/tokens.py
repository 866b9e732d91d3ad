"""Checks of the token counts the rates are built on: usage missing (no_usage), usage
overruled by two witnesses that agree on another count (usage_mismatch), the local count
alone outvoted (local_tokenizer_mismatch), and usage standing alone against a count of its own
that could not overrule it (usage_unconfirmed).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchy.checks.check import Check
from benchy.checks.found import FirstOf, Share
from benchy.checks.registry import (
    INFO,
    WARNING,
    Code,
    Warning_,
)
from benchy.measure import evidence, stats
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
    TokenCountEntry,
)
from benchy.results.verdicts.details import (
    LocalTokenizerMismatch,
    NoUsage,
    RequestCount,
    UsageMismatch,
)
from benchy.results.view import RunView


@dataclass(frozen=True)
class Guessed(Share):
    """Requests without usage counted by estimate, and the scale calibration measured."""

    scale: float


class NoUsageCheck(Check[Guessed]):
    """Only where the count is then an estimate: one token per event, which the locally counted
    text confirms, needs no usage."""

    code = Code.NO_USAGE

    def detect(self, case: CaseResult, run: RunView) -> Guessed | None:
        facts = case.facts()  # without usage, and counted by estimate
        if not facts.n_guessed:
            return None
        scale = run.setup.calibration.scale if run.setup.calibration else 1.0
        return Guessed(facts.n_guessed, facts.n_ok, scale)

    def words(self, case: CaseResult, found: Guessed) -> CheckWarning:
        return Warning_(
            Code.NO_USAGE,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests carried no token usage and several tokens per "
            f"event: benchy counted the answer's text with its own tokenizer (× {found.scale:.3g}, the "
            "ratio calibration measured), so token counts and the rates built on them are estimates.",
            "Ask the server for usage (benchy sends stream_options include_usage; some proxies "
            "drop it) or measure the server directly.",
            details=NoUsage(requests=found.requests, scale=found.scale),
        )


no_usage = NoUsageCheck()  # registered by this name (checks/warnings.py), as each check below


USAGE_HINT = (
    "A backend or proxy miscounts usage. The figures use the count of the answer's text; check the "
    "server's usage with one curl request against the text it returned."
)


@dataclass(frozen=True)
class Overruled(Share):
    """Requests whose usage was overruled: the first one's count, and usage against the count
    used (medians)."""

    first: TokenCountEntry
    usage: float
    counted: float


class UsageMismatchCheck(Check[Overruled]):
    """usage against two independent witnesses that agree on another count (evidence.token_count),
    or usage below the event count."""

    code = Code.USAGE_MISMATCH

    def detect(self, case: CaseResult, run: RunView) -> Overruled | None:
        facts = case.facts()
        first = facts.first_doubted
        if first is None:
            return None
        usage, counted = stats.median(facts.doubted_usage), stats.median(facts.doubted_tokens)
        return Overruled(facts.n_doubted, facts.n_ok, first, usage, counted)

    def words(self, case: CaseResult, found: Overruled) -> CheckWarning:
        first, usage, counted = found.first, found.usage, found.counted
        return Warning_(
            Code.USAGE_MISMATCH,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests: {first.mismatch}. The figures use the {first.source} "
            f"count ({first.tokens} tokens), not usage.",
            USAGE_HINT,
            details=UsageMismatch(requests=found.requests, usage_median=usage, counted_median=counted),
            evidence=(Evidence("usage_to_stream_ratio", usage / counted if counted else None, 1.0, "ratio"),),
        )


usage_mismatch = UsageMismatchCheck()


LOCAL_TOKENIZER_HINT = (
    "Nothing to fix: usage is used. The local count is benchy's o200k tokenizer, an estimate "
    "for any model whose vocabulary is not o200k (and for random-weight models, whose text is noise)."
)


@dataclass(frozen=True)
class Outvoted(FirstOf):
    """Requests whose local count alone disagreed with usage: local against usage (median) and
    the witnesses that backed usage (sorted)."""

    ratio: float
    backed_by: tuple[str, ...]


class LocalTokenizerMismatchCheck(Check[Outvoted]):
    """A note, not a warning: the local count alone disagreed with usage and was outvoted."""

    code = Code.LOCAL_TOKENIZER_MISMATCH

    def detect(self, case: CaseResult, run: RunView) -> Outvoted | None:
        facts = case.facts()
        if not facts.n_local_odd:
            return None
        backed = tuple(sorted(facts.local_backed_by))
        ratio = stats.median(facts.local_ratios)
        return Outvoted(facts.n_local_odd, facts.n_ok, facts.first_local_mismatch, ratio, backed)

    def words(self, case: CaseResult, found: Outvoted) -> CheckWarning:
        return Warning_(
            Code.LOCAL_TOKENIZER_MISMATCH,
            INFO,
            case.label,
            f"{found.requests} of {found.of} requests: {found.first}.",
            LOCAL_TOKENIZER_HINT,
            details=LocalTokenizerMismatch(requests=found.requests, backed_by=list(found.backed_by)),
            evidence=(Evidence("local_to_usage_ratio", found.ratio, 1.0, "ratio"),),
        )


local_tokenizer_mismatch = LocalTokenizerMismatchCheck()


UNCONFIRMED_HINT = (
    "Without the server's /tokenize, at several tokens an event, a usage that over-claims by less than "
    "two tokenizers may differ ({share:g}x) cannot be caught from the stream. Check one answer's usage "
    "against its text with the model's own tokenizer, or measure where the server offers /tokenize."
)


class UsageUnconfirmed(Check[FirstOf]):
    """usage stood alone: nothing backed it and the local count, a witness of its own (scaled on
    tokens the server was seen to generate, or --tokenizer's), disagreed within what two
    tokenizers may differ. Neither the cause nor the true count can be told: said, not guessed."""

    code = Code.USAGE_UNCONFIRMED

    def detect(self, case: CaseResult, run: RunView) -> FirstOf | None:
        facts = case.facts()
        if not facts.n_usage_alone:
            return None
        return FirstOf(facts.n_usage_alone, facts.n_ok, facts.first_usage_alone)

    def words(self, case: CaseResult, found: FirstOf) -> CheckWarning:
        return Warning_(
            Code.USAGE_UNCONFIRMED,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests: {found.first}. The rates rest on usage alone for them.",
            UNCONFIRMED_HINT.format(share=round(1 / evidence.RETOKENIZED_MIN_SHARE, 2)),
            details=RequestCount(requests=found.requests),
        )


usage_unconfirmed = UsageUnconfirmed()
