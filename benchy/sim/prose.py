"""What the simulator says: natural prose by default, and the broken outputs a sanity check
must catch (issue 55).

prose     sentences of plain English (benchy/data/sim_prose.txt, written for benchy; each token one o200k token too), in an
          order drawn from the request's seed: real words, so output sanity finds nothing.
garbage   the made-up two-syllable words the simulator used to speak ("kunvu bilfar"): what a
          model with random weights says, in the simulator's own measure.
degraded  prose with a share of its tokens (--degraded-share) replaced by junk: fragments of
          other scripts, stray combining marks, control and replacement characters, as a kernel
          that corrupts some tokens streams them.
loop      prose that falls into a loop: the same short phrase again and again to the limit.
fillers   a random-weight gpt-oss's reserved special tokens (`<filler_17>`): each one token as
          generated, but resent as text (a conversation's history) the template reads it as
          plain characters, several tokens each (`<`, `filler`, `_`, `1`, `7`, `>`), so a
          history holds more tokens than the answer generated, as on a real server.

Every piece but a filler is one token of the simulator's vocabulary (vocab.pieces of the text), so each mode
streams exactly the tokens it plans, and counts them as the truth log does. The truth log keeps
each request's mode and how many of its tokens are broken (`output`, `broken_tokens`).
"""

from __future__ import annotations

import functools
import random
from importlib import resources

from benchy.sim import vocab

MODES = ("prose", "garbage", "degraded", "loop", "fillers")
FILLERS = 200  # gpt-oss's reserved <filler_N> tokens: N below this
LOOP_AFTER = 0.25  # the loop starts after this share of an answer's tokens
_LOOP_PHRASES = (" and then the", " I think that", " the same", " is is", " of the river")
# One simulator token each (a word of ASCII letters, or one other character): fragments a
# random vocabulary draws from, other scripts' letters, marks with nothing to sit on, controls.
_JUNK = (
    " ighter",
    " ensional",
    " setText",
    " INGTON",
    " ponses",
    " odel",
    " ylum",
    " Rubin",
    " kode",
    " ctxt",
    " \u0416",
    "\u044b",
    "\u0449",
    " \u7684",
    "\u6c34",
    "\u30f3",
    "\u3063",
    " \u0630",
    "\u0639",
    "\u05e9",
    "\u0301",
    "\u0308",
    "\u0489",
    "\ufffd",
    "\ufffd",
    "\x06",
    "\x10",
    "\x7f",
    " \u0e17",
    "\u0bb0",
)


@functools.lru_cache(maxsize=1)
def sentences() -> tuple[str, ...]:
    text = resources.files("benchy").joinpath("data/sim_prose.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def texts(mode: str, n: int, seed: int, share: float = 0.3) -> tuple[list[str], int]:
    """n generated tokens' texts in `mode`, and how many of them are broken (garbage, junk, or
    inside the loop); deterministic per seed."""
    if mode == "garbage":
        return vocab.words(n, seed), n
    if mode == "fillers":
        rng = random.Random(seed)
        return [f"<filler_{rng.randrange(FILLERS)}>" for _ in range(n)], n
    out = _prose(n, seed)
    if mode == "degraded":
        rng = random.Random(seed ^ 0x5EED)
        hit = [i for i in range(n) if rng.random() < share]
        for i in hit:
            out[i] = _JUNK[rng.randrange(len(_JUNK))]
        return out, len(hit)
    if mode == "loop":
        start = int(n * LOOP_AFTER)
        phrase = vocab.pieces(_LOOP_PHRASES[seed % len(_LOOP_PHRASES)])
        looped = [phrase[i % len(phrase)] for i in range(n - start)]
        return out[:start] + looped, n - start
    return out, 0


def logprobs(mode: str, ids: list[int], share: float = 0.3) -> list[float]:
    """The log-probability this mode's model gives each prompt token (echo with logprobs): a
    working model finds plain text likely (about −1.5 a token), a broken one does not (about
    −7), a degraded one in between (a token in `share` as the broken one); each from its id,
    so the same prompt always scores the same."""
    out = []
    for i in ids:
        u = (i % 997) / 997
        broken = mode == "garbage" or (mode == "degraded" and (i // 997) % 1000 < share * 1000)
        out.append(-(6.0 + 2 * u) if broken else -(1.0 + u))
    return out


def _prose(n: int, seed: int) -> list[str]:
    """n tokens of sentences drawn in a seeded order, each led by a space (so a stop string
    " " cuts every answer at once, as it did the made-up words)."""
    if n <= 0:
        return []
    rng = random.Random(seed)
    pool = sentences()
    out: list[str] = []
    while len(out) < n:
        sentence = pool[rng.randrange(len(pool))]
        out.extend(vocab.pieces(" " + sentence))  # a space first, as each made-up word had
    return out[:n]
