"""Lengths that vary (`--pp-stddev N`, `--tg-stddev N`): each request of a sweep case draws its
prompt and output length from a normal distribution around --pp / --tg, as the peers' random
datasets do, so a server is not measured only on one length that its batching may favour.

Each length is exact as drawn: the prompt is built to that many server tokens and the answer
asked for exactly that many (min_tokens = max_tokens), and the record keeps both as its targets
(target_prompt_tokens, target_output_tokens), which every check of lengths reads. A draw is
rounded; an output is at least 1 token, a prompt at least half of --pp and at least PROMPT_FLOOR
(or --pp, if shorter): the chat template and the nonce take a few dozen tokens, so a far shorter
prompt could not be built. Each draw is made from (seed, case, request index) alone, so a
request's length is the same whichever worker process sends it and in every rerun with the same
--seed.
"""

from __future__ import annotations

import numpy as np

PROMPT_FLOOR = 64  # the shortest prompt drawn (a shorter --pp is never drawn below itself)


def drawn(mean: int, stddev: float, floor: int, seed: int, case: int, index: int, which: int) -> int:
    """Request `index`'s length: `mean` when stddev is 0, else a rounded normal draw, at least
    min(floor, mean). `which` keeps the prompt's and the output's draws apart."""
    if not stddev:
        return mean
    rng = np.random.default_rng((seed, case, index, which))
    return max(min(floor, mean), round(rng.normal(mean, stddev)))


def prompt_length(pp: int, stddev: float, seed: int, case: int, index: int) -> int:
    return drawn(pp, stddev, max(PROMPT_FLOOR, pp // 2), seed, case, index, 0)


def output_length(tg: int, stddev: float, seed: int, case: int, index: int) -> int:
    return drawn(tg, stddev, 1, seed, case, index, 1)
