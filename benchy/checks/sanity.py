"""Output sanity's verdict (issue 55): a case whose answers look broken, or show a pattern
only a broken server makes. The figures stay (the server really streamed those tokens at that
rate), and the warning says what it streamed, with examples quoted. The detection is
benchy/measure/sanity's; this module only words what case.sanity holds.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def output_garbage(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    found = case.sanity
    if found is None:
        return
    said = _broken(found) + _patterns(found)
    if not said:
        return
    quotes = [e.text for e in found.examples]
    shown = "".join(f" e.g. {q!r}" for q in quotes[:2])
    yield Warning_(
        Code.OUTPUT_GARBAGE,
        WARNING,
        case.label,
        f"The answers look broken: {'; '.join(said)}. The figures are what the server streamed, "
        f"but it streamed garbage at that rate.{shown}",
        "A broken kernel, quantization or backend still generates tokens at full speed. Read a "
        "few answers (requests.jsonl keeps them), compare with a known-good backend, or run "
        "benchy with --canary before trusting the figures.",
        details=taken_from(OutputGarbage, found, examples=quotes),
        evidence=(
            Evidence(
                "broken_share", found.broken / found.judged if found.judged else 0.0, BROKEN_SHARE, "of judged answers"
            ),
        ),
    )


def canary_failed(run: RunView) -> Iterable[CheckWarning]:
    """--canary asked for fixed prompts with known answers; any answered wrong (or not at all)
    is said by name, with what came back. Opt-in, so a user who asked for it sees its result
    even when the sweep's answers pass output sanity: a model can speak well and still be wrong."""
    canary = run.setup.canary
    if canary is None:
        return
    wrong = [a for a in canary.answers if not a.passed]
    if not wrong:
        return
    shown = "; ".join(_canary_miss(a) for a in wrong)
    yield Warning_(
        Code.CANARY_FAILED,
        WARNING,
        None,
        f"The canary failed {len(wrong)} of {len(canary.answers)} fixed prompts ({shown}). The figures "
        "are what the server delivered, but it answered wrong where the answer is known.",
        "A broken kernel, quantization or template answers wrong at full speed. Run the canary on a "
        "known-good backend of the same model and `benchy compare` the two runs: it shows what changed "
        "prompt by prompt. (A small or base model may fail these prompts honestly.)",
        details=CanaryFailed(asked=len(canary.answers), failed=[a.name for a in wrong]),
    )


def _canary_miss(a: CanaryAnswer) -> str:
    if a.answer is None:
        return f"{a.name}: no answer ({a.error})"
    return f"{a.name}: expected {a.expected!r}, answered {a.head!r}"


def flagged(found: OutputSanity) -> bool:
    """Whether the case's answers draw the verdict (a check's rule, for tests and reports)."""
    return bool(_broken(found) or _patterns(found))


def _broken(found: OutputSanity) -> list[str]:
    n, judged = found.broken, found.judged
    if not n or n < BROKEN_SHARE * judged or (n < 2 and n < judged):
        return []
    signs = ", ".join(f"{_SIGNS.get(k, k)} ({v})" for k, v in sorted(found.reasons.items(), key=lambda kv: -kv[1]))
    return [f"{n} of {judged} judged answers show {signs}"]


def _patterns(found: OutputSanity) -> list[str]:
    said = []
    if found.long_answers >= PATTERN_MIN and found.identical >= IDENTICAL_SHARE * found.long_answers:
        said.append(f"{found.identical} of {found.long_answers} answers are word for word the same as another")
    if found.answers >= PATTERN_MIN and found.stopped_at_once >= STOPPED_SHARE * found.answers:
        said.append(f"{found.stopped_at_once} of {found.answers} answers stopped at their first token")
    return said
