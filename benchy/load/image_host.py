"""benchy's own image host for `--images --image-url`: the run's images served over HTTP from
127.0.0.1, so that the server fetches each one by URL as it would a user's picture.

Why a host of its own: an image by URL costs the server a fetch (and its engine's media
connector a download) that a data URL does not, and some deployments only take URLs. The
host is the standard library's threaded HTTP server over a temporary folder: the load
generator (in this process or a worker's) writes each image there as a PNG named by its
content before the request that carries it is sent, and the host serves the folder until the
run ends, when both go. It binds 127.0.0.1 only: benchy never listens on another address, so
only a server on this machine can fetch these images (docs/images.md).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchy.load.images import ImageSettings


class _Quiet(SimpleHTTPRequestHandler):
    """Serves the folder without a log line per fetch (a run fetches thousands)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        return


class ImageHost:
    """A folder served on 127.0.0.1 by a daemon thread, from start to close."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="benchy-images-")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=self.folder))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="benchy-image-host", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(images: ImageSettings | None) -> tuple[ImageHost | None, ImageSettings | None]:
    """The host and the settings that name it, where --image-url asks for one; else (None, images)."""
    if images is None or not images.url:
        return None, images
    host = ImageHost()
    return host, dataclasses.replace(images, host=host.url, folder=host.folder)
