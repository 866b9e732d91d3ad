"""Secrets that benchy must never write, and how they are taken out of what it keeps.

A secret is: the API key; the user and password of a URL (the base URL's or a proxy's); the
value of every `--header` (an Azure `api-key`, a gateway token: benchy cannot tell which extra
header is a credential, so none is ever written); the value of a credential-named key of
`--extra-body` (extra_body.py); and the value of a URL's query parameter whose
name says it is one (`key`, `token`, `sig`, …). They go into requests and nowhere else: the
saved command line and URLs show `***` in their place, and every message benchy keeps (errors,
a server's echo of a header) is scrubbed of them, as written and percent-encoded.

A message is scrubbed by place first: a URL's user:password and its secret-named query
values, whatever they are. Then by value, where the secret's own text stands: a secret of
MIN_SECRET characters or more, as a whole word while it is short enough to be one (a password
`sunshine` is masked in "bad password sunshine", never inside "sunshines"), anywhere once it
is longer. A shorter one (a user `u`, a header value `1`) is masked only in its place: masked
by value it would be masked in every word that holds its letters ("Connection ref***sed").

Kept light (no aiohttp): the CLI imports it to redact its own command line.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

SECRET_FLAGS = ("--api-key",)
BODY_FLAGS = ("--extra-body",)  # JSON: credential-named keys' values are secrets (extra_body.py)
HEADER_FLAGS = ("--header", "-H")  # `Name: value`: the name stays, the value is a secret
URL_USERINFO = re.compile(r"(://)[^/@\s]*@")  # user:password@ in any URL of a command line
SECRET_PARAM = re.compile(r"key|token|secret|sig|passw|auth|credential", re.IGNORECASE)
_QUERY_PAIR = re.compile(r"([?&])([^=&#\s]*)=([^&#\s]*)")
MIN_SECRET = 4  # shorter secrets are scrubbed by place only
WORD_LONG = 12  # shorter secrets may be words: scrubbed where they stand as a whole word
_WORD_CHAR = "A-Za-z0-9"


def redact_url(url: str) -> str:
    """The URL without user:password, with the value of every secret-named query parameter as
    *** (`?api-version=…` stays: it says which API was measured), fit for results and logs."""
    parts = urlsplit(url)
    return redact_query(urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, "")))


def redact_query(text: str) -> str:
    """`text` with the value of every secret-named `name=value` of a query string as ***."""
    return _QUERY_PAIR.sub(lambda m: f"{m[1]}{m[2]}=***" if SECRET_PARAM.search(m[2]) else m[0], text)


def url_secrets(url: str) -> list[str]:
    """The user, password (as written and decoded) and secret-named query values of a URL."""
    parts = urlsplit(url)
    found = [parts.username or "", parts.password or ""] if "@" in parts.netloc else []
    found += [unquote(s) for s in found]
    return found + [value for name, value in parse_qsl(parts.query) if SECRET_PARAM.search(name)]


def header_secrets(value: str) -> list[str]:
    """A header value, and its credential alone when it has a scheme (`Bearer <token>`)."""
    return [value, value.split()[-1]] if " " in value.strip() else [value]


def scrub_list(secrets: list[str | None]) -> list[str]:
    """Every form a secret takes in a message (as written, percent-encoded), longest first;
    those shorter than MIN_SECRET left to scrubbing by place."""
    forms = {form for s in secrets if s for form in (s, quote(s, safe="")) if len(form) >= MIN_SECRET}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret as ***: a URL's credentials by place, then `secrets` (from
    scrub_list) by value."""
    text = redact_query(URL_USERINFO.sub(r"\1***@", text))
    if not secrets:
        return text
    return re.sub("|".join(_by_value(s) for s in secrets), "***", text)


def _by_value(secret: str) -> str:
    if len(secret) >= WORD_LONG:
        return re.escape(secret)
    return rf"(?<![{_WORD_CHAR}]){re.escape(secret)}(?![{_WORD_CHAR}])"


def redacted_command_line(argv: list[str]) -> str:
    """`benchy …` as typed, with every secret as ***: the --api-key value, a --header value
    (its name stays), a URL's user:password and secret-named query values."""
    out: list[str] = []
    hide: str | None = None
    for arg in argv:
        if hide is not None:
            out.append(_hidden_value(hide, arg))
            hide = None
        elif arg in SECRET_FLAGS or arg in HEADER_FLAGS or arg in BODY_FLAGS:
            out.append(arg)
            hide = arg
        elif arg.startswith(tuple(f"{f}=" for f in SECRET_FLAGS + HEADER_FLAGS + BODY_FLAGS)):
            flag, _, value = arg.partition("=")
            out.append(f"{flag}={_hidden_value(flag, value)}")
        elif arg.startswith("-H") and len(arg) > 2:  # -H'Name: value', click's attached form
            out.append(f"-H{_hidden_value('-H', arg[2:])}")
        else:
            out.append(redact_query(URL_USERINFO.sub(r"\1***@", arg)))
    return "benchy " + shlex.join(out)


def _hidden_value(flag: str, value: str) -> str:
    if flag in BODY_FLAGS:
        from benchy.client.extra_body import redacted_argument

        return redacted_argument(value)
    if flag in HEADER_FLAGS and ":" in value:
        return f"{value.partition(':')[0]}: ***"
    return "***"
