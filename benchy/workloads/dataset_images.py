"""A dataset's images (ShareGPT-4V / LLaVA-style JSON): each entry's `image` (or `images`) field,
resolved when the file is read, before anything is sent.

Those datasets name an entry's picture beside its conversation, `{"image": "coco/0001.jpg",
"conversations": [{"from": "human", "value": "<image>\\nWhat is in the bus?"}, …]}`, and mark
where it sits in the text with `<image>`. benchy sends each picture as it is (its bytes as a
data URL, read when the request is planned; a data URL in the file goes as it is), as a content
part beside the first user message's text, so the `<image>` marker is dropped from the text:
the server's chat template puts its own image tokens there. A path is taken relative to the
dataset file's folder (or absolute); a file that is not there is a one-line error naming the
entry, before the run sends anything. A Parquet (or Arrow) image column goes the same way: its
value is Hugging Face's {"bytes", "path"} struct (or the bytes alone), sent as a data URL of the
bytes' own type.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from benchy.workloads.spec import WorkloadError

IMAGE_KEYS = ("image", "images")
MARKER = re.compile(r"<image>\n?")
MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
}


Turns = tuple[tuple[str, str], ...]


def resolve(where: str, turns: Turns, row: object, folder: Path) -> tuple[Turns, tuple[str, ...]]:
    """An entry's turns without the `<image>` markers and its images (data URLs as they are,
    paths made absolute and checked); the turns as they are and no image where the row names none."""
    given = next((row[k] for k in IMAGE_KEYS if isinstance(row, dict) and row.get(k)), None)
    if given is None:
        return turns, ()
    images = tuple(_one(where, folder, one) for one in (given if isinstance(given, list) else [given]))
    return tuple((role, MARKER.sub("", text) if role == "user" else text) for role, text in turns), images


def _one(where: str, folder: Path, given: object) -> str:
    """One image as a data URL or an absolute path: a path or data URL as text, or a Parquet
    image column's value (Hugging Face's {"bytes", "path"} struct, or the bytes alone)."""
    if isinstance(given, dict):  # a Hugging Face Image feature: the bytes when it holds them, else its path
        given = given.get("bytes") or given.get("path")
    if isinstance(given, (bytes, bytearray)):
        return _bytes_url(where, bytes(given))
    if not isinstance(given, str) or not given:
        raise WorkloadError(f"{where}: image must be a path, a data URL or image bytes, or a list of them")
    return given if given.startswith("data:") else _file(where, folder, given)


_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif"))


def _bytes_url(where: str, data: bytes) -> str:
    """Image bytes (a Parquet column's) as a data URL of their own type, as they are."""
    kind = next((media for magic, media in _MAGIC if data.startswith(magic)), None)
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        kind = "image/webp"
    if kind is None:
        raise WorkloadError(f"{where}: image bytes are not PNG, JPEG, GIF or WebP")
    return f"data:{kind};base64," + base64.b64encode(data).decode()


def _file(where: str, folder: Path, name: str) -> str:
    path = Path(name) if Path(name).is_absolute() else folder / name
    if path.suffix.lower() not in MEDIA_TYPES:
        raise WorkloadError(f"{where}: image {name}: not a picture benchy can send ({', '.join(MEDIA_TYPES)})")
    if not path.is_file():
        raise WorkloadError(f"{where}: image not found: {name} (paths are taken relative to the dataset file)")
    return str(path.resolve())


def as_url(image: str) -> tuple[str, int]:
    """The image as a request sends it (a data URL) and its bytes: a file's bytes as they are."""
    if image.startswith("data:"):
        _, _, data = image.partition(",")
        return image, len(base64.b64decode(data, validate=False))
    raw = Path(image).read_bytes()
    return f"data:{MEDIA_TYPES[Path(image).suffix.lower()]};base64," + base64.b64encode(raw).decode(), len(raw)
