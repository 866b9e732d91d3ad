"""The rerank API (`--endpoint rerank`, POST /v1/rerank): a pooling endpoint that scores each
document against a query, as llama.cpp's server (`--reranking`), vLLM (a cross-encoder) and the
Cohere and Jina APIs serve it: {"model", "query", "documents": [...], "top_n"} answered by
{"results": [{"index", "relevance_score"}], "usage": {"total_tokens"}}.

A cross-encoder reads the query and one document together, so every document costs the query's
tokens, the document's and the model's separators; the server's usage counts them all, and
that count is what input tokens/s divides. The query is one fixed sentence: calibration then
finds it in the overhead of one document's sequence, so `--pp` is each (query, document) pair
as the server counts it, and each document is led by its own nonce, so no prefix cache serves
more of a pair than the shared query.

The answer is read as a whole chat completion with no text (as embeddings.py does); an answer
that scores fewer documents than were sent fails with kind server_error.
"""

from __future__ import annotations

from benchy.client.booking import Booker
from benchy.client.embeddings import _GENERATION_ONLY
from benchy.jsontypes import JsonObject

QUERY = "Which of these passages answers the question best?"


def payload(model: str | None, prompt: str, max_tokens: int, stream: bool, extra: JsonObject | None) -> JsonObject:
    """The rerank body: the prompt as the one document, or extra `input` (a batch) as the
    documents; top_n asks for every score, so a dropped document shows."""
    options = {k: v for k, v in (extra or {}).items() if k not in _GENERATION_ONLY}
    given = options.pop("input", None)
    documents = given if isinstance(given, list) else [prompt]
    body: JsonObject = {"model": model, "query": QUERY, "documents": documents}
    body.update(options)
    body["top_n"] = len(documents)  # every score, whatever --extra-body asks: a dropped one must show
    return body


def inputs(body: JsonObject) -> int:
    """How many documents the body asks to score."""
    given = body.get("documents")
    return len(given) if isinstance(given, list) else 1


def as_chat(obj: object) -> object:
    """A rerank answer as a chat completion with no text, its usage the server's count of every
    pair (prompt_tokens, else total_tokens: vLLM and Jina give only that). A body with no
    `results` list is returned as it is (whole.py fails it: no choice)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("results"), list):
        return obj
    scored = {r.get("index") for r in obj["results"] if isinstance(r, dict) and _number(r.get("relevance_score"))}
    if not scored or len(scored) != len(obj["results"]):
        return {"error": {"message": f"{len(obj['results']) - len(scored)} of {len(obj['results'])} results unscored"}}
    usage = obj.get("usage")
    if isinstance(usage, dict):
        counted = usage.get("prompt_tokens", usage.get("total_tokens"))
        usage = {"prompt_tokens": counted, "completion_tokens": 0}
    choice = {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
    return {"id": obj.get("id"), "choices": [choice], "usage": usage, "scored": len(scored)}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def book(reader: Booker, obj: JsonObject, now: float) -> None:
    """No rerank server streams: an event stream here is a server that is not one."""
    reader.fail("bad_stream", "a rerank answer came as an event stream")
