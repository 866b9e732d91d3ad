"""The embeddings API (`--endpoint embeddings`, POST /v1/embeddings): a pooling endpoint that
answers each input with a vector, never with tokens, and never streams.

The answer is read as a whole chat completion (whole.py) with no text and chat-named usage, so
that every count, check and latency figure works as for a non-streamed answer: requests/s,
input tokens/s (usage.prompt_tokens, the server's count of all inputs) and the end-to-end
latency. The figures only a stream can give (TTFT, inter-token latency, decode rates) are then
withheld with their reason (not_streamed) rather than taken from the end of the answer.

An answer with an entry of `data` that holds no embedding fails with kind server_error: a
server that dropped an input did not really embed it.
"""

from __future__ import annotations

from benchy.client.booking import Booker
from benchy.jsontypes import JsonObject

# Options of a generation body that mean nothing to a pooling endpoint (exact-length and
# template options, which the plan shares across endpoints): never sent, lest a strict server refuse.
_GENERATION_ONLY = ("stream", "stream_options", "min_tokens", "ignore_eos", "max_tokens", "stop", "temperature")


def payload(model: str | None, prompt: str, max_tokens: int, stream: bool, extra: JsonObject | None) -> JsonObject:
    """The embeddings body: the prompt as the one input, or extra `input` (a batch) as is;
    floats asked for, so every server answers alike. max_tokens and stream do not apply."""
    options = {k: v for k, v in (extra or {}).items() if k not in _GENERATION_ONLY}
    inputs = options.pop("input", None)
    body: JsonObject = {"model": model, "input": inputs if inputs is not None else prompt, "encoding_format": "float"}
    body.update(options)
    return body


def inputs(body: JsonObject) -> int:
    """How many inputs the body asks to embed."""
    given = body.get("input")
    return len(given) if isinstance(given, list) else 1


def as_chat(obj: object) -> object:
    """An embeddings answer as a chat completion with no text: finish_reason stop, usage with
    prompt_tokens as the server counted the inputs and no completion tokens. A body with no
    `data` list is returned as it is (whole.py fails it: no choice)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        return obj
    vectors = [d for d in obj["data"] if isinstance(d, dict) and isinstance(d.get("embedding"), list)]
    if len(vectors) != len(obj["data"]) or not vectors:
        return {
            "error": {"message": f"{len(obj['data']) - len(vectors)} of {len(obj['data'])} inputs have no embedding"}
        }
    choice = {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
    usage = obj.get("usage")
    if isinstance(usage, dict):
        usage = {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": 0}
    return {"id": obj.get("id"), "choices": [choice], "usage": usage}


def book(reader: Booker, obj: JsonObject, now: float) -> None:
    """No embeddings server streams: an event stream here is a server that is not one."""
    reader.fail("bad_stream", "an embeddings answer came as an event stream")
