"""The simulator's rerank face: POST /v1/rerank (and /rerank), as llama.cpp's server with
`--reranking` and vLLM with a cross-encoder serve it.

A cross-encoder scores a document by reading it with the query: each document is one sequence
of the query's tokens, a separator and the document's tokens, prefilled like any prompt (the
same serial queue and rate, the same prefix cache, so a query shared by every request is served
from it and a nonce-led document is not). Nothing is decoded. The answer holds each document's
index and a score derived from its tokens, best first, `top_n` of them, and usage counting
every pair's tokens (as llama.cpp counts them: prompt_tokens and total_tokens alike).

The truth log records `input_tokens` (each pair's tokens, in document order), `query_tokens`
and `cached_tokens`, what tests judge benchy's counts against.
"""

from __future__ import annotations

import json

from benchy.jsontypes import JsonObject
from benchy.sim import vocab
from benchy.sim.config import SimConfig
from benchy.sim.embeddings import vector
from benchy.sim.request import ApiError, check_model

SEPARATOR = 2  # the one token between query and document (a BERT [SEP], an EOS)


def parse(cfg: SimConfig, body: JsonObject) -> tuple[str, list[int], list[list[int]]]:
    """(model, the query's ids, each (query, document) pair's ids); ApiError for a bad body or a
    pair past the context."""
    model = check_model(cfg, body)
    query, documents = body.get("query"), body.get("documents")
    if not isinstance(query, str) or not query:
        raise ApiError(400, "'query' must be a non-empty string")
    if not isinstance(documents, list) or not documents or not all(isinstance(d, str) for d in documents):
        raise ApiError(400, "'documents' must be a non-empty list of strings")
    asked = body.get("top_n", len(documents))
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        raise ApiError(400, "'top_n' must be a positive integer")
    head = vocab.encode(query) + [SEPARATOR]
    pairs = [head + vocab.encode(d) for d in documents]
    longest = max(len(ids) for ids in pairs)
    if longest > cfg.context_length:
        raise ApiError(400, f"a query and document of {longest} tokens exceed the context of {cfg.context_length}")
    return model, head[:-1], pairs


def answer(model: str, response_id: str, pairs: list[list[int]], top_n: int) -> bytes:
    """The rerank body: the best top_n documents by score, usage counting every pair."""
    scores = [(vector(ids)[0] + 0.5, i) for i, ids in enumerate(pairs)]
    best = sorted(scores, key=lambda s: (-s[0], s[1]))[:top_n]
    results = [{"index": i, "relevance_score": score} for score, i in best]
    tokens = sum(len(ids) for ids in pairs)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return json.dumps(
        {"id": response_id, "object": "list", "model": model, "results": results, "usage": usage}
    ).encode()


def top_n(body: JsonObject, documents: int) -> int:
    asked = body.get("top_n", documents)
    return min(asked, documents) if isinstance(asked, int) else documents
