"""Checks of the prompt lengths the server counted against those sent: in a case's requests
and at calibration (prompt_length_mismatch).
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import (
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
    PromptLengthMismatch,
    taken_from,
)
from benchy.results.view import RunView

PROMPT_LENGTH_HINT = (
    "The server keeps only part of long prompts (Ollama's num_ctx default, "
    "truncate_prompt_tokens, context shifting): raise its context, or lower --pp/--depth."
)
PROMPT_LONGER_HINT = (
    "The server counted more than benchy sent: it adds text of its own to some requests (a hidden "
    "system prompt, a chat template that differs from the one calibration measured)."
)
ESTIMATE_HINT = (
    " benchy's lengths here are an o200k estimate (setup.calibration.lengths says why no exact "
    "source fit); the model's own tokenizer, --tokenizer FILE|DIR, may fit where the server's did not."
)


def prompt_length_mismatch(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """The server counted another prompt length than the row's, for a reason of its own:
    shorter (truncation) or longer (text it adds). Misses on both sides of the target under an
    o200k estimate are benchy's own fitting error, not the server's: no warning (the requests'
    prefill t/s is still left out, each row saying why). A minority of misses qualifies those
    requests; the case's prefill t/s is the others' (results/build.py)."""
    facts = case.facts()  # prefill_tps unavailable as PROMPT_LENGTH_MISSED
    missed = facts.n_prompt_missed
    if not missed:
        return
    longer = facts.n_prompt_longer
    estimate = case.prompt_lengths == evidence.LENGTHS_O200K
    if estimate and 0 < longer < missed:
        return
    counted = int(stats.median(facts.prompt_missed_tokens))
    target = facts.prompt_missed_target
    way = "more" if longer * 2 > missed else "fewer"
    hint = PROMPT_LONGER_HINT if way == "more" else PROMPT_LENGTH_HINT
    whole = "prefill_tps" in case.unavailable
    effect = (
        "so the row is not the prompt length it is labelled with: prefill t/s is withheld, and TTFT and "
        "end-to-end figures are those of another prompt."
        if whole
        else "those requests are left out of prefill t/s, which is the other requests'; their TTFT and "
        "end-to-end times are those of another prompt."
    )
    yield Warning_(
        Code.PROMPT_LENGTH_MISMATCH,
        WARNING,
        case.label,
        f"{missed} of {facts.n_ok} requests: the server counted {counted} prompt tokens (median), {way} than "
        f"the {target} sent, {effect}",
        hint + (ESTIMATE_HINT if estimate else ""),
        withheld=("prefill_tps",) if whole else (),
        details=PromptLengthMismatch(requests=missed, target_tokens=target, server_tokens_median=counted),
        evidence=(Evidence("server_prompt_tokens_median", counted, target, "tokens"),),
    )


def prompt_length_at_calibration(run: RunView) -> Iterable[CheckWarning]:
    """calibration's length_check (prompts.check_length): the run's longest prompt, counted."""
    for endpoint, cal in sorted(run.setup.calibrations.items()):
        found = cal.length_check
        if found is not None and found.missed:
            yield Warning_(
                Code.PROMPT_LENGTH_MISMATCH,
                WARNING,
                None,
                f"At calibration ({endpoint}) the server counted {found.server_tokens} prompt tokens "
                f"of the run's longest prompt ({found.target_tokens} tokens): it does not read long "
                "prompts whole, so rows above that length are not what their labels say.",
                PROMPT_LENGTH_HINT,
                metrics=(),  # no case's figures: a setup's
                withheld=(),
                details=taken_from(PromptLengthMismatch, found, endpoint=endpoint),
                evidence=(Evidence("server_prompt_tokens", found.server_tokens, found.target_tokens, "tokens"),),
            )
