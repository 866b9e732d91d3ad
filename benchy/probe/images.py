"""`benchy probe-cache --images`: does the server cache image processing, and what does it save?

The prefix probe's question asked of an image. An engine keeps its processor's and encoder's
work for an image keyed by the image's content hash (vLLM's multimodal processor cache, its
encoder cache), so a picture sent again skips its decoding and encoding; a nonce in front of
the text does not change that, because the image's hash is not the text's.

So each request here leads with its own nonce-led text (results.probe.IMAGE_TEXT_TOKENS, exact: no prefix cache
serves any of it) and carries one image of `--image-size`: on the shared side the same image
every time (its first send fills the cache), on the unique side a new image of the same size
each time. The two sides are interleaved and sent one at a time, as the prefix probe's are,
and judged by the same tests on TTFT (probe/verdict.py): a repeated image significantly faster
than unique ones is a cache that serves image work, and the difference of the medians is what
it saves a request. No cached_tokens weighs in: servers report prefix hits there, not image hits.
"""

from __future__ import annotations

from dataclasses import fields

from benchy.measure import images as image_figures
from benchy.measure import stats
from benchy.probe.bundle import ImagePlan
from benchy.records.plan import Tagged
from benchy.results.probe import ImageProbe, LengthEntry

IMAGE_CASE = "image"  # a record's case: "image 448x448 shared"


def image_entry(size: ImagePlan, entry: LengthEntry, records: list[Tagged]) -> ImageProbe:
    """`entry`, both sides judged as a length is (analyze.length_entry, by TTFT alone), with the
    images' size, their tokens as the server counted them and what a repeat saves."""
    repeats = [t for t in entry.shared.ttft_s[1:] if t is not None]  # the first send fills the cache
    uniques = [t for t in entry.unique.ttft_s if t is not None]
    saved = stats.median(uniques) - stats.median(repeats) if repeats and uniques else None
    counted = [found[0] for found in map(image_figures.image_tokens, records) if found is not None]
    made = {f.name: getattr(entry, f.name) for f in fields(entry)}
    made["reason"] = _words(entry.verdict, entry.reason, saved)
    return ImageProbe(
        **made,
        width=size.width,
        height=size.height,
        image_tokens=stats.median(counted) if counted else None,
        saved_s=saved,
    )


def _words(verdict: str, reason: str, saved: float | None) -> str:
    """The verdict's reason said of images: what it means for the server, and the saving."""
    reason = reason.replace("unique prefixes", "unique images of the same size").removeprefix("repeats ")
    if verdict == "detected" and saved is not None:
        return f"the server caches image processing: a repeated image is {reason}; it saves {saved * 1000:,.0f} ms a request"
    if verdict == "not_detected":
        return f"no image cache found: a repeated image is no faster than unique ones ({reason})"
    return reason
