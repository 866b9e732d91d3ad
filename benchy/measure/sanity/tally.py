"""A case's answers summed for output sanity: how many were judged, how many look broken and
why, a few quoted, and the patterns only many answers show (the same answer to different
prompts, every answer stopped at its first token). What results.json keeps as case.sanity;
the verdict is the check's (checks/sanity.py).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.measure.sanity import text as judging
from benchy.records.plan import Tagged

EXAMPLES = 3  # broken answers quoted
QUOTE_CHARS = 160  # of each
IDENTICAL_MIN_CHARS = 200  # shorter answers may well be the same for different prompts (a sentence or two)


@dataclass(frozen=True, slots=True)
class Example(Saved):
    """One broken answer, quoted."""

    request_id: str = ""
    reasons: list[str] = field(default_factory=list)
    text: str = _opt("its first characters, as streamed (controls escaped)", "")


@dataclass(frozen=True, slots=True)
class OutputSanity(Saved):
    """(1.26) Output sanity of a case's measured answers (benchy/measure/sanity): whether the text the
    figures were measured on still reads as language."""

    judged: int = _opt("answers long enough to judge (terse ones are not)", 0)
    broken: int = _opt("judged answers that show a sign of breakage", 0)
    reasons: dict[str, int] = _opt(
        "sign → answers: odd_characters, repetition_loop, mixed_scripts, not_words", factory=dict
    )
    scripts: dict[str, int] = _opt("script of most of an answer's letters → answers", factory=dict)
    identical: int = _opt(f"answers of {IDENTICAL_MIN_CHARS}+ characters equal to another answer of the case", 0)
    long_answers: int = _opt(f"answers of {IDENTICAL_MIN_CHARS}+ characters", 0)
    stopped_at_once: int = _opt("answers of at most one token that ended by a stop, where more were asked", 0)
    answers: int = _opt("successful measured answers", 0)
    examples: list[Example] = _opt("broken answers, quoted", factory=list)


class SanityTally:
    """Adds a case's measured successful answers one at a time (the analysis reads each record
    once); keeps a hash of each long answer, not its text. The counts are its own, running:
    `result()` makes the case's OutputSanity from them once, at the end."""

    def __init__(self) -> None:
        self.answers = self.judged = self.broken = self.long_answers = self.stopped_at_once = 0
        self.reasons: dict[str, int] = {}
        self.scripts: dict[str, int] = {}
        self.examples: list[Example] = []
        self._seen: Counter[bytes] = Counter()

    def add(self, rec: Tagged) -> None:
        if not rec.ok or rec.warmup or rec.control or rec.inputs is not None:
            return  # a pooling request (--endpoint embeddings) answers vectors: no text to judge
        self.answers += 1
        self._pattern(rec)
        self._judge(rec)

    def _pattern(self, rec: Tagged) -> None:
        """What only many answers show: one token ended by a stop, and repeats of long answers."""
        text = rec.token_event_text
        # without usage, the answer's events count its tokens
        made = rec.completion_tokens if rec.completion_tokens is not None else len(rec.token_event_s)
        if made <= 1 and rec.finish_reason == "stop" and rec.target_output_tokens > 1:
            self.stopped_at_once += 1
        if len(text.strip()) >= IDENTICAL_MIN_CHARS:
            self.long_answers += 1
            self._seen[hashlib.blake2b(text.encode(), digest_size=12).digest()] += 1

    def _judge(self, rec: Tagged) -> None:
        found = judging.judge(rec.token_event_text)
        if not found.judged:
            return
        self.judged += 1
        if found.script:
            self.scripts[found.script] = self.scripts.get(found.script, 0) + 1
        if found.broken:
            self.broken += 1
            for reason in found.reasons:
                self.reasons[reason] = self.reasons.get(reason, 0) + 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(Example(rec.request_id, list(found.reasons), quote(rec.token_event_text)))

    def result(self) -> OutputSanity | None:
        """The case's figures; None where it had no successful answer."""
        if not self.answers:
            return None
        return OutputSanity(
            judged=self.judged,
            broken=self.broken,
            reasons=dict(self.reasons),
            scripts=dict(self.scripts),
            identical=sum(n for n in self._seen.values() if n > 1),
            long_answers=self.long_answers,
            stopped_at_once=self.stopped_at_once,
            answers=self.answers,
            examples=list(self.examples),
        )


def quote(text: str) -> str:
    """The first QUOTE_CHARS characters, controls and stray marks shown as escapes, so the
    quote can be printed and read."""
    head = text.strip()[:QUOTE_CHARS]
    return "".join(ch if ch in "\n\t" or ch.isprintable() else ch.encode("unicode_escape").decode() for ch in head)
