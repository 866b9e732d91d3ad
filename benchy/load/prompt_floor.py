"""The shortest prompt benchy can build, known before anything is sent.

Why: `--pp 1` was refused only after benchy had connected to the server and calibrated prompt
lengths with three requests ("the chat template and nonce alone take about 44 tokens"). Part of
that floor is benchy's own and known up front: each synthetic prompt starts with an 8-word
nonce (one token a word, so no prefix cache can serve it) and needs at least one word of its
own after it. A case asking for less is refused here, before a connection; the server's share
(its chat template) is only known after calibration, which still refuses what is left.
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.workloads.case import Case

NONCE_TOKENS = 8  # a nonce's words (prompts.PromptFactory.next_nonce), each one token
SYNTHETIC_KINDS = ("sweep", "multi_turn", "shared_prefix")  # prompts benchy writes to --pp


def shortest(nonce: bool) -> int:
    """Tokens the shortest prompt takes before any chat template: the nonce, then one word."""
    return (NONCE_TOKENS if nonce else 0) + 1


def check(cases: Iterable[Case], nonce: bool) -> None:
    """ValueError (one line) for a case whose --pp is below the shortest prompt benchy can write."""
    floor = shortest(nonce)
    short = sorted({c.pp for c in cases if c.kind in SYNTHETIC_KINDS and c.dataset is None and c.pp < floor})
    if not short:
        return
    why = (
        f"each prompt starts with a nonce of {NONCE_TOKENS} tokens, so that no cache can serve it, and needs "
        "a word of its own after it (--no-nonce drops the nonce); the server's chat template adds more"
        if nonce
        else "a prompt needs at least one token"
    )
    raise ValueError(f"--pp {short[0]} is too short: a prompt takes at least {floor} tokens: {why}")
