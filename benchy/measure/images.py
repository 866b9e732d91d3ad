"""Image figures (`--images`): each request's image tokens as the server counted them, and a
case's summary of them beside the text's prompt tokens.

A server counts an image's tokens into usage.prompt_tokens with the text's. Two witnesses
separate them, and the better one that is there is used (`image_tokens_from`):

- `server`: the server's own count, usage.prompt_tokens_details.image_tokens, where it gives one;
- `usage_minus_text`: prompt_tokens minus the text's target. The text is the same string as
  without images and its length was fitted to the server's own count before the run
  (calibration), so the rest is the images' (with the few tokens of the template's image
  markers, which are the images' too). A dataset's own prompt has no exact length (its
  target is 0): its images' tokens are the server's own count or none.

The text's own length is then checked only where the server gave its image count: without it,
the difference is all there is, and a text that missed its length would show as image tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.measure import stats
from benchy.records.plan import Tagged

SERVER = "server"
USAGE_MINUS_TEXT = "usage_minus_text"


def image_tokens(rec: Tagged) -> tuple[int, str] | None:
    """(the images' tokens, whence), or None: no image, a failed request or no usage."""
    if not rec.images or not rec.ok:
        return None
    if rec.server_image_tokens is not None:
        return rec.server_image_tokens, SERVER
    if rec.prompt_tokens is None or not rec.target_prompt_tokens:  # no exact text (a dataset's own prompt)
        return None
    return rec.prompt_tokens - rec.target_prompt_tokens, USAGE_MINUS_TEXT


def text_tokens(rec: Tagged) -> int | None:
    """The server's count of the text part alone: prompt_tokens, less its own image count with
    images; None where images came without that count (the text cannot be told apart)."""
    if rec.prompt_tokens is None or not rec.images:
        return rec.prompt_tokens
    if rec.server_image_tokens is None:
        return None
    return rec.prompt_tokens - rec.server_image_tokens


def request_fields(rec: Tagged) -> dict[str, Any]:
    """A request row's image_tokens and image_tokens_from (nothing without images)."""
    found = image_tokens(rec)
    return {"image_tokens": found[0], "image_tokens_from": found[1]} if found else {}


@dataclass(frozen=True, slots=True)
class ImageSetup(Saved):
    """--images as the run sent them (setup.load.images)."""

    count: int = _opt("images in each request")
    width: int = _opt("pixels")
    height: int = _opt("pixels")
    shared: bool = _opt("--shared-images: the same images in every request", False)
    served_as: str = _opt("data (data URLs) or url (--image-url: benchy's image host on 127.0.0.1)", "data")


@dataclass(frozen=True, slots=True)
class ImageFigures(Saved):
    """A case's images: what was sent, and what the server made of them (medians over the
    measured successful requests), beside the text's prompt tokens."""

    images_per_request: int = _opt("images each request carried")
    image_bytes: float | None = _opt("median encoded bytes of a request's images")
    image_tokens: float | None = _opt("median image tokens of a request, as the server counted them")
    image_tokens_from: str | None = _opt("server (usage's own image count) or usage_minus_text")
    text_prompt_tokens: float | None = _opt("median prompt tokens of the text part (the target where not told apart)")
    counted: int = _opt("requests whose image tokens were counted", 0)


class ImageTally:
    """A case's image figures, gathered in the one pass over its rows (a spilled case's rows
    are read once): add each row, then `result()`."""

    def __init__(self) -> None:
        self.sent = 0
        self.bytes: list[int] = []
        self.tokens: list[int] = []
        self.text: list[int] = []
        self.sources: set[str] = set()

    def add(self, row: Any) -> None:
        """A row (RequestResult): counted where measured and it carried images."""
        if not row.images or row.warmup or row.control:
            return
        self.sent = max(self.sent, row.images)
        self.bytes.append(row.image_bytes or 0)
        if row.ok and row.image_tokens is not None:
            self.tokens.append(row.image_tokens)
            self.text.append(row.prompt_tokens - row.image_tokens)
            self.sources.add(row.image_tokens_from)

    def result(self) -> ImageFigures | None:
        """The summary; None where no measured request carried an image."""
        if not self.sent:
            return None
        return ImageFigures(
            images_per_request=self.sent,
            image_bytes=stats.median(self.bytes),
            image_tokens=stats.median(self.tokens) if self.tokens else None,
            image_tokens_from="+".join(sorted(self.sources)) or None,
            text_prompt_tokens=stats.median(self.text) if self.text else None,
            counted=len(self.tokens),
        )
