"""The `benchy browse` command: browse.py's page over run folders, optionally served."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import click

SERVE_PORT = 8765  # --serve's default: not 8000, where benchy sim and vLLM listen


@click.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the site's index.html (its links to each run's report are relative); default: "
    "benchy-browse inside the first FOLDER, never the current folder.",
)
@click.option("--serve", is_flag=True, help="Then serve it over HTTP on 127.0.0.1 (python -m http.server) until ^C.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=SERVE_PORT,
    show_default=True,
    help="With --serve (not 8000: benchy sim's and vLLM's; 0: a free one).",
)
def browse(folders: tuple[Path, ...], output: Path | None, serve: bool, port: int) -> None:
    """A static page over every run under FOLDERS (found recursively): sort, filter, and tick two
    or more runs to compare them. Reads saved results.json files only."""
    from benchy.report import browse as site
    from benchy.report import browse_others as others

    if output is None:
        first = folders[0] if folders[0].is_dir() else folders[0].parent
        output = first / "benchy-browse"
    index, runs, skipped = site.write(list(folders), output)
    for line in skipped:
        click.echo(f"benchy: skipped: {line}", err=True)
    if not runs and not any(others.find(list(folders))):
        raise click.ClickException(f"no results.json under {', '.join(map(str, folders))}")
    click.echo(f"{len(runs)} runs → {index}")
    if serve:
        _serve(index, [r.path.parent for r in runs], port)


def _serve(index: Path, run_folders: list[Path], port: int) -> None:
    """Serves the folder that holds the site and every run, so the index's relative links resolve."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
            """A browser that stops a download (a page left, a reload) is no error to report."""
            if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                super().handle_error(request, client_address)

    root = Path(os.path.commonpath([index.parent.resolve(), *(p.resolve() for p in run_folders)]))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    try:
        server = Server(("127.0.0.1", port), handler)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    url = f"http://127.0.0.1:{server.server_address[1]}/{index.resolve().relative_to(root).as_posix()}"
    click.echo(f"serving {url} (^C to stop)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
