"""Checks of the token counts the rates are built on: usage missing (no_usage), usage
overruled by two witnesses that agree on another count (usage_mismatch), the local count
alone outvoted (local_tokenizer_mismatch), and usage standing alone against a count of its own
that could not overrule it (usage_unconfirmed).
"""

from __future__ import annotations

from collections.abc import Iterable

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
)
from benchy.results.verdicts.details import (
    LocalTokenizerMismatch,
    NoUsage,
    RequestCount,
    UsageMismatch,
)
from benchy.results.view import RunView


def no_usage(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """Only where the count is then an estimate: one token per event, which the locally counted
    text confirms, needs no usage."""
    facts = case.facts()  # without usage, and counted by estimate
    if facts.n_guessed:
        scale = run.setup.calibration.scale if run.setup.calibration else 1.0
        yield Warning_(
            Code.NO_USAGE,
            WARNING,
            case.label,
            f"{facts.n_guessed} of {facts.n_ok} requests carried no token usage and several tokens per "
            f"event: benchy counted the answer's text with its own tokenizer (× {scale:.3g}, the "
            "ratio calibration measured), so token counts and the rates built on them are estimates.",
            "Ask the server for usage (benchy sends stream_options include_usage; some proxies "
            "drop it) or measure the server directly.",
            details=NoUsage(requests=facts.n_guessed, scale=scale),
        )


USAGE_HINT = (
    "A backend or proxy miscounts usage. The figures use the count of the answer's text; check the "
    "server's usage with one curl request against the text it returned."
)


def usage_mismatch(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """usage against two independent witnesses that agree on another count (evidence.token_count),
    or usage below the event count."""
    facts = case.facts()
    first = facts.first_doubted
    if first is None:
        return
    usage = stats.median(facts.doubted_usage)
    counted = stats.median(facts.doubted_tokens)
    yield Warning_(
        Code.USAGE_MISMATCH,
        WARNING,
        case.label,
        f"{facts.n_doubted} of {facts.n_ok} requests: {first.mismatch}. The figures use the {first.source} "
        f"count ({first.tokens} tokens), not usage.",
        USAGE_HINT,
        details=UsageMismatch(requests=facts.n_doubted, usage_median=usage, counted_median=counted),
        evidence=(Evidence("usage_to_stream_ratio", usage / counted if counted else None, 1.0, "ratio"),),
    )


LOCAL_TOKENIZER_HINT = (
    "Nothing to fix: usage is used. The local count is benchy's o200k tokenizer, an estimate "
    "for any model whose vocabulary is not o200k (and for random-weight models, whose text is noise)."
)


def local_tokenizer_mismatch(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """A note, not a warning: the local count alone disagreed with usage and was outvoted."""
    facts = case.facts()
    if not facts.n_local_odd:
        return
    ratio = stats.median(facts.local_ratios)
    yield Warning_(
        Code.LOCAL_TOKENIZER_MISMATCH,
        INFO,
        case.label,
        f"{facts.n_local_odd} of {facts.n_ok} requests: {facts.first_local_mismatch}.",
        LOCAL_TOKENIZER_HINT,
        details=LocalTokenizerMismatch(requests=facts.n_local_odd, backed_by=sorted(facts.local_backed_by)),
        evidence=(Evidence("local_to_usage_ratio", ratio, 1.0, "ratio"),),
    )


UNCONFIRMED_HINT = (
    "Without the server's /tokenize, at several tokens an event, a usage that over-claims by less than "
    "two tokenizers may differ ({share:g}x) cannot be caught from the stream. Check one answer's usage "
    "against its text with the model's own tokenizer, or measure where the server offers /tokenize."
)


def usage_unconfirmed(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """usage stood alone: nothing backed it and the local count, a witness of its own (scaled on
    tokens the server was seen to generate, or --tokenizer's), disagreed within what two
    tokenizers may differ. Neither the cause nor the true count can be told: said, not guessed."""
    facts = case.facts()
    if not facts.n_usage_alone:
        return
    yield Warning_(
        Code.USAGE_UNCONFIRMED,
        WARNING,
        case.label,
        f"{facts.n_usage_alone} of {facts.n_ok} requests: {facts.first_usage_alone}. The rates rest on "
        "usage alone for them.",
        UNCONFIRMED_HINT.format(share=round(1 / evidence.RETOKENIZED_MIN_SHARE, 2)),
        details=RequestCount(requests=facts.n_usage_alone),
    )
