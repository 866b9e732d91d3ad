"""Checks of the prompt lengths the server counted against those sent: in a case's requests
and at calibration (prompt_length_mismatch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.found import Share
from benchy.checks.registry import (
    WARNING,
    Code,
    Warning_,
)
from benchy.measure import evidence, stats
from benchy.results.setup import LengthCheck
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


@dataclass(frozen=True)
class Miscounted(Share):
    """Requests whose prompt the server counted at another length: the median it counted
    against the target sent, whether most were longer, whether the case's prefill t/s is
    withheld as a whole, and whether benchy's lengths are an o200k estimate."""

    counted: int
    target: int | None
    window: tuple[int, int] | None  # a later turn's: the lengths its history could make
    longer: bool
    whole: bool
    estimate: bool


class PromptLengthMismatchCheck(Check[Miscounted]):
    """The server counted another prompt length than the row's, for a reason of its own:
    shorter (truncation) or longer (text it adds). Misses on both sides of the target under an
    o200k estimate are benchy's own fitting error, not the server's: no warning (the requests'
    prefill t/s is still left out, each row saying why). A minority of misses qualifies those
    requests; the case's prefill t/s is the others' (results/build.py)."""

    code = Code.PROMPT_LENGTH_MISMATCH

    def detect(self, case: CaseResult, run: RunView) -> Miscounted | None:
        facts = case.facts()  # prefill_tps unavailable as PROMPT_LENGTH_MISSED
        missed = facts.n_prompt_missed
        if not missed:
            return None
        longer = facts.n_prompt_longer
        estimate = case.prompt_lengths == evidence.LENGTHS_O200K
        if estimate and 0 < longer < missed:
            return None
        counted = int(stats.median(facts.prompt_missed_tokens))
        whole = "prefill_tps" in case.unavailable
        return Miscounted(
            missed,
            facts.n_ok,
            counted,
            facts.prompt_missed_target,
            facts.prompt_missed_window,
            longer * 2 > missed,
            whole,
            estimate,
        )

    def words(self, case: CaseResult, found: Miscounted) -> CheckWarning:
        counted, target = found.counted, found.target
        hint = PROMPT_LONGER_HINT if found.longer else PROMPT_LENGTH_HINT
        effect = (
            "so the row is not the prompt length it is labelled with: prefill t/s is withheld, and TTFT and "
            "end-to-end figures are those of another prompt."
            if found.whole
            else "those requests are left out of prefill t/s, which is the other requests'; their TTFT and "
            "end-to-end times are those of another prompt."
        )
        return Warning_(
            Code.PROMPT_LENGTH_MISMATCH,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests: the server counted {counted} prompt tokens (median), "
            f"{'more' if found.longer else 'fewer'} than {_sent(found)}, {effect}",
            hint + (ESTIMATE_HINT if found.estimate else ""),
            withheld=("prefill_tps",) if found.whole else (),
            details=PromptLengthMismatch(requests=found.requests, target_tokens=target, server_tokens_median=counted),
            evidence=(Evidence("server_prompt_tokens_median", counted, target, "tokens"),),
        )


def _sent(found: Miscounted) -> str:
    """What was sent: a fitted prompt's length, or a later turn's window (its history is the
    server's to count: the previous prompt, the answer resent, the template's wrappers)."""
    if found.window is None:
        return f"the {found.target} sent"
    return "the {}-{} its conversation's history could make".format(*found.window)


prompt_length_mismatch = PromptLengthMismatchCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class MissedAtCalibration:
    """An endpoint whose calibration counted the run's longest prompt short (its length_check)."""

    endpoint: str
    check: LengthCheck


class PromptLengthAtCalibration(RunLevelCheck[MissedAtCalibration]):
    """calibration's length_check (prompts.check_length): the run's longest prompt, counted."""

    code = Code.PROMPT_LENGTH_MISMATCH

    def detect(self, run: RunView) -> Sequence[MissedAtCalibration]:
        return [
            MissedAtCalibration(endpoint, cal.length_check)
            for endpoint, cal in sorted(run.setup.calibrations.items())
            if cal.length_check is not None and cal.length_check.missed
        ]

    def words(self, run: RunView, found: MissedAtCalibration) -> CheckWarning:
        endpoint, check = found.endpoint, found.check
        return Warning_(
            Code.PROMPT_LENGTH_MISMATCH,
            WARNING,
            None,
            f"At calibration ({endpoint}) the server counted {check.server_tokens} prompt tokens "
            f"of the run's longest prompt ({check.target_tokens} tokens): it does not read long "
            "prompts whole, so rows above that length are not what their labels say.",
            PROMPT_LENGTH_HINT,
            metrics=(),  # no case's figures: a setup's
            withheld=(),
            details=taken_from(PromptLengthMismatch, check, endpoint=endpoint),
            evidence=(Evidence("server_prompt_tokens", check.server_tokens, check.target_tokens, "tokens"),),
        )


prompt_length_at_calibration = PromptLengthAtCalibration()
