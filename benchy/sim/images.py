"""The simulator's eyes: the images of a request, decoded for real and encoded through a cache.

A vision-language engine does three things with an image before its prefill, and each one is
here so that a benchmark's image figures can be judged against the truth:

1. **It loads and decodes it** (the multimodal processor). Every image is opened with Pillow
   and decoded in full: its format must be one an engine's processor takes (PNG, JPEG, WebP,
   GIF), and a truncated or corrupt file is refused with HTTP 400, as vLLM refuses one. Its
   true size (not a size the request claims) gives its tokens. A data URL is decoded; an http
   URL is fetched, from a loopback address only (the simulator never reaches out further).
2. **It turns it into tokens by size**: a ViT-style patch grid, ceil(W / P) × ceil(H / P)
   tokens with P = `--image-patch` (28 by default: Qwen2-VL's 14-pixel patches merged 2 × 2).
   Those tokens are prefilled like any prompt token, after the text, and counted in usage's
   prompt_tokens; their ids derive from the image's content hash, as vLLM puts the hash of an
   image into its prefix-cache block keys.
3. **It encodes it through a cache keyed by the content hash** (vLLM's processor and encoder
   caches): a miss costs tokens ÷ `--image-encode-tps` seconds of one encoder per replica
   (images wait for it in turn); a hit costs nothing. `--no-image-cache` encodes every image
   again.

The truth log's `images` lists each image of a request in order — its sha256, width, height,
format, bytes, tokens, whether the encoder cache hit, the seconds encoding took and its source
(data, base64 or the URL fetched) — and
`image_tokens` their sum.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import ipaddress
import math
import time
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from benchy.jsontypes import JsonObject
from benchy.sim.request import ApiError

FORMATS = ("PNG", "JPEG", "WEBP", "GIF")  # what an engine's image processor takes
CACHED_IMAGES = 1024  # images the encoder cache holds (least recently used go first)
IMAGE_ID_BASE, IMAGE_IDS = 3_000_000_000, 1_000_000_000  # image token ids: above every text id (vocab.py), below 2**32
FETCH_TIMEOUT_S = 10.0


@dataclass
class Seen:
    """One image as the simulator processed it (a truth-log entry)."""

    sha256: str
    width: int
    height: int
    format: str
    bytes: int
    tokens: int
    hit: bool = False
    encode_s: float = 0.0
    source: str = "data"  # data (a data URL), base64 (a Messages block) or the URL it was fetched from


def references(messages: list[JsonObject]) -> list[str | bytes]:
    """Each image of the messages, in order: a URL (data: or http:) or the bytes of an
    Anthropic base64 block. Chat's image_url parts, Responses' input_image parts and Messages'
    image blocks are all read, as an engine serving the three APIs reads them."""
    found: list[str | bytes] = []
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict):
                ref = _reference(part)
                if ref is not None:
                    found.append(ref)
    return found


def _reference(part: JsonObject) -> str | bytes | None:
    kind = part.get("type")
    if kind == "image_url":  # chat: {"image_url": {"url": ...}} (or the URL alone)
        given = part.get("image_url")
        url = given.get("url") if isinstance(given, dict) else given
    elif kind == "input_image":  # Responses: {"image_url": "..."}
        url = part.get("image_url")
    elif kind == "image":  # Messages: {"source": {"type": "base64", "data": ...} or {"type": "url", ...}}
        source = part.get("source")
        if not isinstance(source, dict):
            raise ApiError(400, "an image block needs a source object")
        if source.get("type") == "base64":
            return _b64(source.get("data"))
        url = source.get("url")
    else:
        return None
    if not isinstance(url, str):
        raise ApiError(400, f"a {kind} part needs its URL as a string")
    return url


def _b64(data: object) -> bytes:
    if not isinstance(data, str):
        raise ApiError(400, "an image's base64 data must be a string")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "an image's base64 data is not valid base64") from None


async def load(ref: str | bytes) -> bytes:
    """The image's bytes: a base64 block's, a data URL's, or fetched from a loopback URL."""
    if isinstance(ref, bytes):
        return ref
    if ref.startswith("data:"):
        head, sep, data = ref.partition(",")
        if not sep or not head.endswith(";base64"):
            raise ApiError(400, "an image data URL must be data:<type>;base64,<data>")
        return _b64(data)
    parts = urlsplit(ref)
    if parts.scheme not in ("http", "https") or not _loopback(parts.hostname or ""):
        raise ApiError(400, f"the simulator fetches images from loopback http URLs only, not {ref[:80]!r}")
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
            async with session.get(ref) as response:
                if response.status != 200:
                    raise ApiError(400, f"fetching the image {ref} answered HTTP {response.status}")
                return await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ApiError(400, f"cannot fetch the image {ref}: {exc}") from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def decode(data: bytes, patch: int) -> Seen:
    """The image decoded in full with Pillow, as a processor does: its format, true size and
    tokens; ApiError 400 for what no processor would take (not an image, truncated, corrupt)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = image.format or ""
            if kind not in FORMATS:
                raise ApiError(400, f"image format {kind or 'unknown'} is not one of {', '.join(FORMATS)}")
            image.load()  # every pixel: a truncated or corrupt file fails here
            width, height = image.size
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ApiError(400, f"the image cannot be decoded: {exc}") from None
    tokens = math.ceil(width / patch) * math.ceil(height / patch)
    return Seen(hashlib.sha256(data).hexdigest(), width, height, kind, len(data), tokens)


def token_ids(seen: Seen) -> list[int]:
    """The image's placeholder tokens: ids from its content hash, so that equal images give
    equal ids (a prefix cache may reuse them) and different ones never do."""
    return [IMAGE_ID_BASE + zlib.crc32(f"{seen.sha256}:{k}".encode()) % IMAGE_IDS for k in range(seen.tokens)]


class Encoder:
    """One replica's image encoder: one image at a time, and a cache of encoded images keyed
    by content hash (off: every image encoded again)."""

    def __init__(self, tps: float, cache: bool, instant: bool) -> None:
        self.tps, self.cache, self.instant = tps, cache, instant
        self._done: OrderedDict[str, None] = OrderedDict()
        self._busy = asyncio.Lock()

    async def encode(self, seen: Seen) -> None:
        """Encodes the image, or finds it cached; notes hit and time on `seen`."""
        if self.cache and seen.sha256 in self._done:
            self._done.move_to_end(seen.sha256)
            seen.hit = True
            return
        async with self._busy:
            if self.cache and seen.sha256 in self._done:  # encoded while this one waited its turn
                seen.hit = True
                return
            start = time.perf_counter()
            if not self.instant:
                await asyncio.sleep(seen.tokens / self.tps)
            seen.encode_s = time.perf_counter() - start
        if self.cache:
            self._done[seen.sha256] = None
            while len(self._done) > CACHED_IMAGES:
                self._done.popitem(last=False)

    def clear(self) -> None:
        self._done.clear()


async def process(messages: list[JsonObject], patch: int, encoder: Encoder) -> tuple[list[JsonObject], list[int]]:
    """The request's images, loaded, decoded and encoded: (truth-log entries, their token ids)."""
    entries, ids = [], []
    for ref in references(messages):
        seen = decode(await load(ref), patch)
        seen.source = "base64" if isinstance(ref, bytes) else "data" if ref.startswith("data:") else ref
        await encoder.encode(seen)
        entries.append(asdict(seen))
        ids += token_ids(seen)
    return entries, ids
