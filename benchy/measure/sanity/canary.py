"""The canary (`--canary`, issue 55): a few fixed prompts with answers benchy can check, sent
greedily (temperature 0) before the sweep, and the perplexity of a fixed passage where the
server gives prompt log-probabilities.

Why: output sanity (text.py) tells garbage from language; it cannot tell a model that still
speaks but has lost its wits, after a re-quantization (MXFP4 to NVFP4) or on another kernel
backend (Marlin against CUTLASS). A canary answer that was right and is now wrong, an answer
that changed word for word, or a passage whose perplexity rose, shows that in `benchy compare`
(canary_changes). The answers are kept whole, with a hash each: the run's fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from benchy.jsontypes import JsonObject, Saved
from benchy.jsontypes import described as _opt

MAX_TOKENS = 256  # room for a reasoning model to think first
# Public domain (Lincoln, 1863): the fixed passage whose perplexity is measured.
PASSAGE = (
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, "
    "conceived in Liberty, and dedicated to the proposition that all men are created equal. Now we "
    "are engaged in a great civil war, testing whether that nation, or any nation so conceived and "
    "so dedicated, can long endure."
)


@dataclass(frozen=True)
class Prompt:
    """A canary prompt: its words, the answer it expects, and the test of an answer."""

    name: str
    text: str
    expected: str
    passes: Callable[[str, str], bool]  # (answer, expected) → right


def _number(answer: str, expected: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(expected)}(?![\d.])", answer) is not None


def _contains(answer: str, expected: str) -> bool:
    return expected in answer


def _json_shape(answer: str, expected: str) -> bool:
    """The first {...} of the answer is a JSON object with exactly the expected keys and values."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end <= start:
        return False
    try:
        got = json.loads(answer[start : end + 1])
    except ValueError:
        return False
    return bool(got == json.loads(expected))


def prompts(nonce: str) -> tuple[Prompt, ...]:
    return (
        Prompt("arithmetic", "What is 17 multiplied by 23? Reply with the number only.", "391", _number),
        Prompt("copy", f"Repeat this code exactly, and nothing else: {nonce}", nonce, _contains),
        Prompt(
            "count_words",
            "How many words are in this sentence: 'the quick brown fox jumps over the lazy dog'? "
            "Reply with the number only.",
            "9",
            _number,
        ),
        Prompt(
            "json",
            'Reply with a JSON object only, no other text: the key "city" with the string "Paris" '
            'and the key "year" with the integer 1889.',
            '{"city": "Paris", "year": 1889}',
            _json_shape,
        ),
    )


@dataclass(frozen=True, slots=True)
class CanaryAnswer(Saved):
    """One canary prompt's answer."""

    name: str = ""
    prompt: str = ""
    expected: str = ""
    answer: str | None = _opt("the answer's text, reasoning and content (null: the request failed)")
    passed: bool = False
    sha256: str | None = _opt("of the answer's text, the run's nonce replaced by <nonce>: its fingerprint")
    finish_reason: str | None = None
    error: str | None = _opt("why no answer came")

    @property
    def head(self) -> str:
        """The answer's first 60 characters, its whitespace runs as one space: how it is quoted."""
        return " ".join((self.answer or "").split())[:60]


@dataclass(frozen=True, slots=True)
class Canary(Saved):
    """(1.26) --canary: fixed prompts with checkable answers, sent greedily before the sweep."""

    endpoint: str = ""
    answers: list[CanaryAnswer] = field(default_factory=list)
    perplexity: float | None = _opt("of the fixed passage (canary.PASSAGE), from the server's prompt log-probabilities")
    perplexity_tokens: int | None = _opt("tokens whose log-probabilities it averaged")
    perplexity_unavailable: str | None = _opt("why there is no perplexity")

    @property
    def passed(self) -> int:
        return sum(1 for a in self.answers if a.passed)


def answered(p: Prompt, text: str, finish: str | None, nonce: str) -> CanaryAnswer:
    """A canary prompt's answer judged, with its fingerprint: the sha256 of its text with the
    run's nonce taken out (the same model copies another nonce the same way)."""
    sha = hashlib.sha256(text.replace(nonce, "<nonce>").encode()).hexdigest()
    return CanaryAnswer(p.name, p.text, p.expected, text, p.passes(text, p.expected), sha, finish)


def perplexity_of(body: bytes) -> tuple[float | None, int | None, str | None]:
    """exp(−mean log p) of an echoed completion's prompt tokens: (perplexity, tokens, None), or
    (None, None, why)."""
    try:
        logprobs = prompt_logprobs(json.loads(body))
    except (ValueError, KeyError, TypeError, IndexError):
        logprobs = []
    if len(logprobs) < 2:
        return None, None, "the server returned no log-probabilities of the prompt (echo)"
    return math.exp(-sum(logprobs) / len(logprobs)), len(logprobs), None


def prompt_logprobs(obj: JsonObject) -> list[float]:
    """The prompt's token log-probabilities of an echoed completion: the first token has none,
    the generated one after the prompt's usage.prompt_tokens is left out."""
    choice = obj["choices"][0]
    values = choice["logprobs"]["token_logprobs"]
    n = (obj.get("usage") or {}).get("prompt_tokens") or len(values)
    return [float(v) for v in values[:n] if isinstance(v, (int, float))]


@dataclass
class CanaryChange(Saved):
    """One canary prompt (or the perplexity) between two runs."""

    name: str = ""
    a: str = ""
    b: str = ""
    change: str = _opt("what changed: now fails, now passes, answer changed, same; or the perplexity's change", "")


def changes(a: Canary | None, b: Canary | None) -> list[CanaryChange]:
    """What changed between two runs' canaries, prompt by prompt, then the perplexity; empty
    where neither ran one."""
    if a is None and b is None:
        return []
    if a is None or b is None:
        return [
            CanaryChange("canary", "ran" if a else "not run", "ran" if b else "not run", "only one run has a canary")
        ]
    by_name = {x.name: x for x in b.answers}
    out = [_answer_change(x, by_name.get(x.name)) for x in a.answers]
    out.append(_perplexity_change(a, b))
    return out


def _answer_change(a: CanaryAnswer, b: CanaryAnswer | None) -> CanaryChange:
    if b is None:
        return CanaryChange(a.name, _said(a), "not asked", "not asked in the second run")
    if a.passed != b.passed:
        word = "now fails" if a.passed else "now passes"
    else:
        word = "same answer" if a.sha256 == b.sha256 else "answer changed"
    return CanaryChange(a.name, _said(a), _said(b), word)


def _said(x: CanaryAnswer) -> str:
    if x.answer is None:
        return f"failed: {x.error}"
    return f"{'pass' if x.passed else 'FAIL'}: {x.head!r}"


def _perplexity_change(a: Canary, b: Canary) -> CanaryChange:
    pa, pb = a.perplexity, b.perplexity
    if pa is None or pb is None:
        return CanaryChange("perplexity", _ppl(a), _ppl(b), "not comparable")
    return CanaryChange("perplexity", _ppl(a), _ppl(b), f"{(pb - pa) / pa:+.1%}")


def _ppl(x: Canary) -> str:
    return f"{x.perplexity:.3f}" if x.perplexity is not None else f"n/a ({x.perplexity_unavailable})"


def lines(found: list[CanaryChange], a_name: str, b_name: str) -> list[str]:
    """The canary's changes as a markdown table (benchy compare)."""
    if not found:
        return []
    out = ["Canary (--canary): fixed prompts, greedy; what changed between the runs:", ""]
    out += [f"| prompt | {a_name} | {b_name} | change |", "|---|---|---|---|"]
    out += [f"| {c.name} | {c.a.replace('|', '¦')} | {c.b.replace('|', '¦')} | {c.change} |" for c in found]
    return out + [""]
