"""Output sanity's verdict (issue 55): a case whose answers look broken, or show a pattern
only a broken server makes. The figures stay (the server really streamed those tokens at that
rate), and the warning says what it streamed, with examples quoted. The detection is
benchy/measure/sanity's; this module only words what case.sanity holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import WARNING, Code, Warning_
from benchy.measure.sanity.canary import CanaryAnswer
from benchy.measure.sanity.tally import OutputSanity
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.verdicts.details import CanaryFailed, OutputGarbage, taken_from
from benchy.results.view import RunView

BROKEN_SHARE = 0.1  # of the judged answers, at least two (or all, of one or two)
PATTERN_MIN = 4  # answers a pattern needs
IDENTICAL_SHARE = 0.5  # of the long answers, each equal to another
STOPPED_SHARE = 0.9  # of the answers, each one token ended by a stop

_SIGNS = {
    "odd_characters": "replacement or control characters",
    "repetition_loop": "a repetition loop",
    "mixed_scripts": "several writing systems mixed",
    "not_words": "words that are no words",
}


@dataclass(frozen=True)
class Signs:
    """What made a case's answers look broken (case.sanity, measure/sanity's tally): enough
    broken answers, and each pattern only a broken server makes; at least one is true."""

    sanity: OutputSanity
    broken: bool
    identical: bool
    stopped_at_once: bool


class OutputGarbageCheck(Check[Signs]):
    code = Code.OUTPUT_GARBAGE

    def detect(self, case: CaseResult, run: RunView) -> Signs | None:
        return None if case.sanity is None else _signs(case.sanity)

    def words(self, case: CaseResult, found: Signs) -> CheckWarning:
        sanity = found.sanity
        quotes = [e.text for e in sanity.examples]
        shown = "".join(f" e.g. {q!r}" for q in quotes[:2])
        return Warning_(
            Code.OUTPUT_GARBAGE,
            WARNING,
            case.label,
            f"The answers look broken: {'; '.join(_said(found))}. The figures are what the server streamed, "
            f"but it streamed garbage at that rate.{shown}",
            "A broken kernel, quantization or backend still generates tokens at full speed. Read a "
            "few answers (requests.jsonl keeps them), compare with a known-good backend, or run "
            "benchy with --canary before trusting the figures.",
            details=taken_from(OutputGarbage, sanity, examples=quotes),
            evidence=(
                Evidence(
                    "broken_share",
                    sanity.broken / sanity.judged if sanity.judged else 0.0,
                    BROKEN_SHARE,
                    "of judged answers",
                ),
            ),
        )


output_garbage = OutputGarbageCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class CanaryWrong:
    """The canary's fixed prompts answered wrong (or not at all), of those asked."""

    asked: int
    wrong: tuple[CanaryAnswer, ...]


class CanaryFailedCheck(RunLevelCheck[CanaryWrong]):
    """--canary asked for fixed prompts with known answers; any answered wrong (or not at all)
    is said by name, with what came back. Opt-in, so a user who asked for it sees its result
    even when the sweep's answers pass output sanity: a model can speak well and still be wrong."""

    code = Code.CANARY_FAILED

    def detect(self, run: RunView) -> Sequence[CanaryWrong]:
        canary = run.setup.canary
        if canary is None:
            return []
        wrong = tuple(a for a in canary.answers if not a.passed)
        return [CanaryWrong(len(canary.answers), wrong)] if wrong else []

    def words(self, run: RunView, found: CanaryWrong) -> CheckWarning:
        wrong = found.wrong
        shown = "; ".join(_canary_miss(a) for a in wrong)
        return Warning_(
            Code.CANARY_FAILED,
            WARNING,
            None,
            f"The canary failed {len(wrong)} of {found.asked} fixed prompts ({shown}). The figures "
            "are what the server delivered, but it answered wrong where the answer is known.",
            "A broken kernel, quantization or template answers wrong at full speed. Run the canary on a "
            "known-good backend of the same model and `benchy compare` the two runs: it shows what changed "
            "prompt by prompt. (A small or base model may fail these prompts honestly.)",
            details=CanaryFailed(asked=found.asked, failed=[a.name for a in wrong]),
        )


canary_failed = CanaryFailedCheck()


def _canary_miss(a: CanaryAnswer) -> str:
    if a.answer is None:
        return f"{a.name}: no answer ({a.error})"
    return f"{a.name}: expected {a.expected!r}, answered {a.head!r}"


def flagged(found: OutputSanity) -> bool:
    """Whether the case's answers draw the verdict (a check's rule, for tests and reports)."""
    return _signs(found) is not None


def _signs(found: OutputSanity) -> Signs | None:
    """The verdict's rule: enough broken answers (a share of those judged, at least two unless
    all were), or a pattern seen in enough answers."""
    n, judged = found.broken, found.judged
    broken = bool(n) and n >= BROKEN_SHARE * judged and not (n < 2 and n < judged)
    identical = found.long_answers >= PATTERN_MIN and found.identical >= IDENTICAL_SHARE * found.long_answers
    stopped = found.answers >= PATTERN_MIN and found.stopped_at_once >= STOPPED_SHARE * found.answers
    return Signs(found, broken, identical, stopped) if broken or identical or stopped else None


def _said(signs: Signs) -> list[str]:
    """Each sign, in words: the broken answers and their kinds, most frequent first, then the patterns."""
    found, said = signs.sanity, []
    if signs.broken:
        kinds = sorted(found.reasons.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{_SIGNS.get(k, k)} ({v})" for k, v in kinds)
        said.append(f"{found.broken} of {found.judged} judged answers show {shown}")
    if signs.identical:
        said.append(f"{found.identical} of {found.long_answers} answers are word for word the same as another")
    if signs.stopped_at_once:
        said.append(f"{found.stopped_at_once} of {found.answers} answers stopped at their first token")
    return said
