"""The images a request carries (`--images N --image-size WxH`): PNGs drawn before it is sent.

An engine caches image work by the image's content hash (vLLM's processor and encoder caches,
the hash in its prefix-cache block keys), so a benchmark that sends one picture again and again
measures a cached encoder — and a nonce in front of the text does not stop it. Each image is
therefore unique by default: random blocks of colour seeded by the request's nonce (and the
image's place in the request), with the nonce itself drawn into the pixels, so that no two
requests of any run ever send the same bytes. `--shared-images` sends the same N images in
every request, to see what a cache does.

Images go as data URLs (`data:image/png;base64,…`), or with `--image-url` as http URLs of
benchy's own image host on 127.0.0.1 (image_host.py): only a server on this machine can fetch
those. The record notes each request's image count and bytes; the server's usage gives their
tokens (measure/images.py).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchy.client.images import IMAGES
from benchy.measure.images import ImageSetup
from benchy.records.plan import RequestTags
from benchy.workloads import dataset_images

BLOCK = 8  # pixels a side of one random colour block (compresses: a 448×448 image is ~20 KB)
MAX_SIDE = 4096


@dataclass(frozen=True)
class ImageSettings:
    """--images and its options: what every request of a case carries."""

    count: int
    width: int
    height: int
    shared: bool = False  # --shared-images: the same images in every request
    url: bool = False  # --image-url: served by benchy's image host instead of data URLs
    host: str | None = None  # the image host's root URL, once it runs (run.py)
    folder: str | None = None  # the folder it serves

    def saved(self) -> ImageSetup:
        """As results.json keeps them (setup.load.images)."""
        served_as = "url" if self.url else "data"
        return ImageSetup(
            count=self.count, width=self.width, height=self.height, shared=self.shared, served_as=served_as
        )


def parse_size(text: str) -> tuple[int, int]:
    """'WxH' as (W, H); ValueError with a one-line reason otherwise."""
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or not (1 <= int(w) <= MAX_SIDE and 1 <= int(h) <= MAX_SIDE):
        raise ValueError(f"--image-size must be WxH in pixels, each 1-{MAX_SIDE} (e.g. 448x448), not {text!r}")
    return int(w), int(h)


def draw(width: int, height: int, seed: str) -> bytes:
    """A PNG of random colour blocks seeded by `seed`, `seed` itself written into the pixels."""
    from PIL import Image, ImageDraw

    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    cols, rows = -(-width // BLOCK), -(-height // BLOCK)
    small = Image.frombytes("RGB", (cols, rows), rng.randbytes(cols * rows * 3))
    image = small.resize((cols * BLOCK, rows * BLOCK), Image.Resampling.NEAREST).crop((0, 0, width, height))
    ImageDraw.Draw(image).text((2, 2), seed, fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)  # most of the cost is deflate: its fastest level
    return out.getvalue()


@functools.lru_cache(maxsize=16)
def _shared(width: int, height: int, name: str) -> bytes:
    """--shared-images: each drawn once per process, not once a request."""
    return draw(width, height, name)


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def for_request(settings: ImageSettings, seed: str, salt: str = "") -> tuple[list[str], int]:
    """A request's images as URLs, and their bytes: drawn from `seed` (the request's nonce),
    or the run's shared ones (--shared-images: drawn from the run's `salt`, so the run's first
    request pays for them as a cold server would)."""
    urls, size = [], 0
    for k in range(settings.count):
        name = f"benchy-shared {salt} {k}" if settings.shared else f"{seed} {k}"
        png = (
            _shared(settings.width, settings.height, name)
            if settings.shared
            else draw(settings.width, settings.height, name)
        )
        size += len(png)
        urls.append(_served(settings, name, png) if settings.url else data_url(png))
    return urls, size


def with_images(
    settings: ImageSettings, tags: RequestTags, options: dict[str, Any], seed: str, salt: str = ""
) -> tuple[RequestTags, dict[str, Any]]:
    """The planned request's tags with its images' count and bytes noted, and the request's
    options with the images (for the client to put into the body)."""
    urls, size = for_request(settings, seed, salt)
    return replace(tags, images=len(urls), image_bytes=size), {**options, IMAGES: urls}


def with_files(
    files: tuple[str, ...], tags: RequestTags, options: dict[str, Any]
) -> tuple[RequestTags, dict[str, Any]]:
    """A dataset entry's images (workloads/dataset_images.py) sent as they are, noted on its tags."""
    sent = [dataset_images.as_url(f) for f in files]
    noted = replace(tags, images=len(sent), image_bytes=sum(size for _, size in sent))
    return noted, {**options, IMAGES: [url for url, _ in sent]}


def _served(settings: ImageSettings, name: str, png: bytes) -> str:
    """The image written into the host's folder, and its URL there."""
    assert settings.host and settings.folder, "--image-url: the image host is not running"
    file = hashlib.sha256(name.encode()).hexdigest()[:24] + ".png"
    path = Path(settings.folder) / file
    if not path.exists():  # written whole, then named: a fetch never meets half a file
        part = path.with_name(f"{file}.{os.getpid()}.part")
        part.write_bytes(png)
        os.replace(part, path)
    return f"{settings.host}/{file}"
