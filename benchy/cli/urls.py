"""What --base-url may be, and the hint a failed request's message gets about it."""

from __future__ import annotations

import click

from benchy.client.redact import URL_USERINFO, redact_query, redact_url

# What OpenSSL says when a TLS handshake meets a server speaking plain HTTP.
PLAIN_HTTP_ANSWERS = (
    "WRONG_VERSION_NUMBER",
    "wrong version number",
    "record layer failure",
    "PACKET_LENGTH_TOO_LONG",
    "an answer in plain HTTP",  # client/http1.py: a server that waits for a request line
)


def with_url_hint(message: str, base_url: str) -> str:
    """A 404 from the API root usually means the /v1 was left out of --base-url, and a TLS
    'wrong version number' that https:// was given to a plain-http server. The suggestion shows
    the fixed URL (/v1 before any query string) and no secret (redact_url)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if parts.scheme == "https" and any(sign in message for sign in PLAIN_HTTP_ANSWERS):
        suggested = redact_url(parts._replace(scheme="http").geturl())
        return f"{message} (the server answered in plain HTTP, not TLS: try --base-url {suggested})"
    if "HTTP 404" in message and not path.endswith("/v1"):
        suggested = redact_url(parts._replace(path=f"{path}/v1").geturl())
        return f"{message} (OpenAI-compatible servers serve the API under /v1: try --base-url {suggested})"
    if "HTTP 404" in message:  # a /v1 root that is still wrong: a prefix too many, or another port
        root = redact_url(parts._replace(path="/v1", query="").geturl())
        return (
            f"{message} (nothing serves the API at {redact_url(base_url)}: --base-url is the API root, the "
            f"URL before /chat/completions, ending in /v1, e.g. {root})"
        )
    return message


def check_url(url: str) -> None:
    from urllib.parse import urlsplit

    shown = redact_query(URL_USERINFO.sub(r"\1***@", url) if "://" in url else url.rpartition("@")[2])
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--base-url must start with http:// or https://, got {shown!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise click.UsageError(f"--base-url {shown!r}: {exc}") from None
    if not parts.hostname:
        raise click.UsageError(f"--base-url {shown!r} names no host")


# Endpoint paths people paste from a server's docs or a curl line; benchy appends them itself.
PASTED_ENDPOINTS = ("/chat/completions", "/completions", "/responses", "/messages", "/embeddings", "/rerank")


def api_root(url: str) -> str:
    """--base-url is the API root (…/v1). The most common paste is a whole endpoint URL
    (…/v1/chat/completions): it is cut back to the root, with a note saying so, rather than
    sent as …/v1/chat/completions/chat/completions and answered with a 404."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    pasted = next((end for end in PASTED_ENDPOINTS if path.endswith(end)), None)
    if pasted is None:
        return url
    root = parts._replace(path=path[: -len(pasted)]).geturl()
    click.echo(f"benchy: note: --base-url is the API root: using {redact_url(root)} (dropped {pasted})", err=True)
    return root
