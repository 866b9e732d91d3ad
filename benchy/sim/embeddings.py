"""The simulator's pooling face: POST /v1/embeddings, as vLLM and llama.cpp serve it.

Each input is tokenized as a prompt is (vocab.encode, no template) and prefilled by the
engine like any prompt: the same serial prefill queue and rate, the same prefix cache (a
repeated input is served from it, as an engine with prefix caching on would), in one of the
max_running slots. Nothing is decoded. The answer is whole JSON: one small vector per input
(derived from its tokens, so equal inputs embed equally) and usage whose prompt_tokens is the
sum of the inputs' tokens.

The truth log records, beside the usual times (arrival, admission, the first prefill's start,
the last one's end, the body's end as the `content` event), `input_tokens`: each input's
token count in order, and `cached_tokens`, their cached share — what a test judges benchy's
input counts and latency against. The immediate faults (--fault http500, http429, reset,
not_sse) are drawn as for generation; the stream faults have no stream to act on.
"""

from __future__ import annotations

import hashlib
import json
import struct

from benchy.jsontypes import JsonObject
from benchy.sim import vocab
from benchy.sim.config import SimConfig
from benchy.sim.request import ApiError, check_model

DIMENSIONS = 8  # small: the vector is not what is measured


def inputs_of(body: JsonObject) -> list[str]:
    """The inputs: a string or a non-empty list of strings (token-id inputs are not served)."""
    given = body.get("input")
    if isinstance(given, str):
        return [given]
    if isinstance(given, list) and given and all(isinstance(x, str) for x in given):
        return given
    raise ApiError(400, "'input' must be a string or a non-empty list of strings")


def vector(ids: list[int]) -> list[float]:
    """A unit-free vector that depends only on the tokens."""
    digest = hashlib.sha256(struct.pack(f"{len(ids)}I", *ids)).digest()
    return [round(b / 255 - 0.5, 4) for b in digest[:DIMENSIONS]]


def answer(model: str, response_id: str, encoded: list[list[int]]) -> bytes:
    """The embeddings body: a list of vectors, usage counting every input's tokens."""
    tokens = sum(len(ids) for ids in encoded)
    data = [{"object": "embedding", "index": i, "embedding": vector(ids)} for i, ids in enumerate(encoded)]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return json.dumps({"id": response_id, "object": "list", "model": model, "data": data, "usage": usage}).encode()


def parse(cfg: SimConfig, body: JsonObject) -> tuple[str, list[list[int]]]:
    """(model, each input's token ids); ApiError for a bad body or an input past the context."""
    model = check_model(cfg, body)
    encoded = [vocab.encode(text) for text in inputs_of(body)]
    longest = max(len(ids) for ids in encoded)
    if longest > cfg.context_length:
        raise ApiError(400, f"input of {longest} tokens exceeds the model's context of {cfg.context_length} tokens")
    return model, encoded
