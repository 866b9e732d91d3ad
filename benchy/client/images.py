"""Images in a request body (`--images`): each API's own way of putting a picture beside the text.

The plan hands the client each request's images as URLs (a `data:image/png;base64,…` URL, or
an http URL of benchy's image host) under the options key IMAGES; the client takes them out
of the options and puts them into the body it built, after the text of the last user message:

- chat: content parts `{"type": "text"}` then `{"type": "image_url", "image_url": {"url"}}`
  (OpenAI, vLLM, SGLang, llama.cpp);
- Responses: `{"type": "input_text"}` then `{"type": "input_image", "image_url"}`;
- Messages: image blocks first, as Anthropic's docs advise, then the text; a data URL goes as a
  base64 source `{"type": "base64", "media_type", "data"}`, an http URL as a `url` source.

The text is the same string as without images, so its length stays exact as calibrated; an
engine's chat template adds its image tokens beside it.
"""

from __future__ import annotations

from typing import Any

IMAGES = "benchy:images"  # the options key: never an API field, so it cannot meet a user's


def attach(body: dict[str, Any], endpoint: str, urls: list[str]) -> dict[str, Any]:
    """The body with `urls` beside the text of its last user message."""
    if endpoint == "responses":
        return _responses(body, urls)
    key = "messages"
    messages = [dict(m) for m in body.get(key) or []]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        raise ValueError("--images: the request has no user message to put an image into")
    last = messages[users[-1]]
    text = last.get("content")
    if not isinstance(text, str):
        raise ValueError("--images: the user message's content is not plain text")
    if endpoint == "messages":
        last["content"] = [*(_anthropic(u) for u in urls), {"type": "text", "text": text}]
    else:
        last["content"] = [
            {"type": "text", "text": text},
            *({"type": "image_url", "image_url": {"url": u}} for u in urls),
        ]
    return {**body, key: messages}


def _responses(body: dict[str, Any], urls: list[str]) -> dict[str, Any]:
    given = body.get("input")
    if not isinstance(given, str):
        raise ValueError("--images on /v1/responses takes a single prompt, not a conversation")
    parts = [{"type": "input_text", "text": given}, *({"type": "input_image", "image_url": u} for u in urls)]
    return {**body, "input": [{"type": "message", "role": "user", "content": parts}]}


def _anthropic(url: str) -> dict[str, Any]:
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media_type = head[len("data:") :].split(";")[0]
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}
