"""The client's configuration: what a run asks of its requests (ClientSettings), the extra
`--header`s it sends, and every secret those settings hold. Secrets (the API key, URL
credentials, every --header value) go into requests and nowhere else: see redact.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchy.client.connect import basic_auth, env_proxy
from benchy.client.extra_body import secrets as extra_body_secrets
from benchy.client.redact import header_secrets, scrub_list, url_secrets


@dataclass(frozen=True)
class ClientSettings:
    """What every request of a run is sent with: where, as whom, within which bounds, over
    which transport. Frozen, so that one value can be handed to each worker and the client
    (which fills in `model` once /models has answered) makes a new one rather than change it."""

    base_url: str
    api_key: str | None = None
    model: str | None = None
    timeout_s: float = 600.0  # whole request
    stall_timeout_s: float = 120.0  # longest silence between two reads of the stream
    insecure: bool = False  # skip TLS verification (only when asked)
    connections: int = 1
    extra_body: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # --header (name, value): values are secrets
    env_proxy: bool = True  # a proxy from HTTP_PROXY / HTTPS_PROXY / NO_PROXY (--no-env-proxy: never)
    transport: str = "lean"  # benchy.client.http1, or "aiohttp"
    stream: bool = True  # False: --no-stream, each answer read whole (client/whole.py)
    tools: list[Any] | None = None  # --tools: OpenAI function definitions (client/tools.py)
    tool_choice: str | None = None  # --tool-choice: auto | required | none | a function's name
    reconnect_s: float = 10.0  # --reconnect-s: how long a server that went away gets to come back (load/reconnect.py)


# Headers whose value the transport decides (framing, the connection); --header may not set them.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type", "expect", "te"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def parse_header(text: str) -> tuple[str, str]:
    """(name, value) of a `--header 'Name: value'`. ValueError otherwise, with a message that
    names the header but never shows its value (it is a secret)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.fullmatch(name):
        raise ValueError("--header must look like 'Name: value' (a name of letters, digits and -, a colon, a value)")
    if name.lower() in _OWN_HEADERS:
        raise ValueError(f"--header {name}: benchy sets that header itself")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"--header {name}: the value holds a line break")
    return name, value


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without `user:password@`, and those credentials as a Basic authorization value
    (None if absent)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    return urlunsplit(parts._replace(netloc=host)), basic_auth(userinfo)


def secrets_of(settings: ClientSettings) -> list[str]:
    """Every secret the settings hold, in every form it takes in a message, for scrubbing."""
    found: list[str | None] = [settings.api_key, *_credentials_of(settings.base_url)]
    found += [s for _, value in settings.headers for s in header_secrets(value)]
    found += extra_body_secrets(settings.extra_body)
    proxy = env_proxy(settings.base_url) if settings.env_proxy else None
    found += _credentials_of(proxy) if proxy else []
    return scrub_list(found)


def _credentials_of(url: str) -> list[str]:
    """A URL's secrets, and its user:password as the Basic token that is sent (a server that
    echoes its Authorization header echoes that)."""
    basic = split_credentials(url)[1]
    return url_secrets(url) + ([basic.split()[-1]] if basic else [])
