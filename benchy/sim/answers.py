"""What the simulator answers when it plays a working model (`benchy sim --answers`): the
questions whose answer can be worked out from the question itself (multiply two numbers, copy
a code back, count a quoted sentence's words, build a small JSON object), answered right, as an
instruction-tuned model answers them. Any other question gets prose (prose.py).

Why: the simulator is no model, so by default it fails benchy's canary (--canary) every time;
with --answers it passes, which is what a run against a working server looks like, and lets a
test see both sides of the canary's verdict. The answers are worked out, not looked up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

_PRODUCT = re.compile(r"\bwhat is (\d+) (?:multiplied by|times) (\d+)\b", re.IGNORECASE)
_COPY = re.compile(r"\brepeat this code exactly\b[^:]*:\s*(\S+)", re.IGNORECASE)
_COUNT = re.compile(r"\bhow many words are in this sentence:\s*'([^']*)'", re.IGNORECASE)
_JSON_KEYS = re.compile(r'the key "(\w+)" with the (string|integer) (?:"([^"]*)"|(-?\d+))', re.IGNORECASE)


def _product(m: re.Match[str]) -> str:
    return str(int(m.group(1)) * int(m.group(2)))


def _copy(m: re.Match[str]) -> str:
    return m.group(1)


def _count(m: re.Match[str]) -> str:
    return str(len(m.group(1).split()))


_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_PRODUCT, _product),
    (_COPY, _copy),
    (_COUNT, _count),
)


def answer(question: str) -> str | None:
    """The right answer to `question` where it can be worked out from it; None otherwise."""
    for pattern, rule in _RULES:
        found = pattern.search(question)
        if found:
            return rule(found)
    keys = _JSON_KEYS.findall(question)
    if "json object" in question.lower() and keys:
        obj = {key: (text if kind.lower() == "string" else int(number)) for key, kind, text, number in keys}
        return json.dumps(obj)
    return None
