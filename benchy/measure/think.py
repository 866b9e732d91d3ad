"""Reasoning written inline: a model served without a reasoning parser puts its thinking in the
answer, between `<think>` and `</think>`. Its own module because the reader (measure/reading.py)
asks it of every stream, and the token counts (measure/evidence.py) count its tags.

  reasoning or answer?  `<think>…</think>` leading the content is reasoning    → `split_think`
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from benchy.records import CONTENT, REASONING

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class ThinkSplit:
    kinds: str  # the event kinds with inline think events as REASONING
    think_events: int  # events inside the think block (its tags included)
    closed: bool  # the block ended with </think> (False: no block, or never closed)
    opened: bool


def _opens_think(texts: Iterable[str]) -> bool:
    """Whether the content's first non-blank text is `<think>`. Blank events before it count
    for nothing: an answer that opens with blank lines is no empty think head (issue 51: every
    event of such an answer was read as reasoning, and its case flagged reasoning_only). A head
    cut inside the tag (a stream that ended at "<thi") still opens one."""
    head = ""
    for text in texts:
        head += text
        if len(head.lstrip()) >= len(THINK_OPEN):
            break
    head = head.lstrip()
    return bool(head) and (head.startswith(THINK_OPEN) or THINK_OPEN.startswith(head))


def split_think(texts: list[str], kinds: str) -> ThinkSplit:
    """Content that opens with `<think>` is reasoning up to `</think>`: those events become
    REASONING. An event holding `</think>` stays reasoning unless answer text follows the tag
    in it. Without `</think>` every content event after `<think>` is reasoning."""
    content = [i for i, k in enumerate(kinds) if k == CONTENT]
    if not content:
        return ThinkSplit(kinds, 0, False, False)
    if not _opens_think(texts[i] for i in content):
        return ThinkSplit(kinds, 0, False, False)
    out = list(kinds)
    seen, closed, marked = "", False, 0
    for i in content:
        seen += texts[i]
        out[i] = REASONING
        marked += 1
        if THINK_CLOSE in seen:
            closed = True
            if seen.split(THINK_CLOSE, 1)[1].strip():
                out[i] = CONTENT  # the answer starts inside this event
                marked -= 1
            break
    return ThinkSplit("".join(out), marked, closed, True)
