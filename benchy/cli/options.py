"""Options several commands share, and the machinery that hands a command one settings
object per group of them (option_group) and lets a flag take several values (MultiValueCommand)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from benchy.cli.urls import api_root, check_url

if TYPE_CHECKING:
    from benchy.client.settings import ClientSettings
    from benchy.load.prompts import Template

# A click command's callback before click.command() makes it a Command, and what decorates one:
# click.option(...) and option_group(...) alike.
Callback = Callable[..., Any]
Decorator = Callable[[Callback], Callback]


class MultiValueCommand(click.Command):
    """Lets options marked in `multi_value` take several values after one flag, as in
    `--pp 512 2048 8192`, by rewriting them to `--pp 512 --pp 2048 --pp 8192` (multiple=True)."""

    multi_value: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, expand_multi_values(args, self.multi_value))


def expand_multi_values(args: list[str], flags: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    current: str | None = None
    taken = 0
    for arg in args:
        if arg in flags:
            current, taken = arg, 0
            continue
        if current and (taken == 0 or not arg.startswith("-")):
            out += [current, arg]
            taken += 1
            continue
        if current and taken == 0:
            out.append(current)
        current = None
        out.append(arg)
    if current and taken == 0:
        out.append(current)  # let click report the missing value
    return out


def option_group(name: str, options: tuple[Decorator, ...], build: Callable[..., object]) -> Decorator:
    """A decorator that adds `options` to a command and hands the command one object made of
    their values, `build(**values)`, as the parameter `name`: commands take settings objects,
    not one parameter per flag. `build` may raise click.UsageError for values that disagree."""

    def decorate(command: Callback) -> Callback:
        probe = click.command()(_apply(options, lambda **_: None))
        names = [param.name for param in probe.params]

        @functools.wraps(command)
        def with_group(*args: object, **kwargs: object) -> object:
            kwargs[name] = build(**{key: kwargs.pop(key) for key in names})
            return command(*args, **kwargs)

        return _apply(options, with_group)

    return decorate


def _apply(options: tuple[Decorator, ...], command: Callback) -> Callback:
    for option in reversed(options):
        command = option(command)
    return command


CLIENT_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--base-url",
        envvar="OPENAI_BASE_URL",
        default="http://127.0.0.1:8000/v1",
        show_default=True,
        help="OpenAI-compatible API root (default from $OPENAI_BASE_URL).",
    ),
    click.option("--model", default=None, help="Model id (default: the first one /v1/models lists)."),
    click.option(
        "--api-key",
        envvar="OPENAI_API_KEY",
        default=None,
        help="Bearer token (default from $OPENAI_API_KEY). Never written anywhere.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=600.0,
        show_default=True,
        help="Seconds allowed per request.",
    ),
    click.option(
        "--stall-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=120.0,
        show_default=True,
        help="Seconds of silence in a stream before the request counts as stalled.",
    ),
    click.option(
        "--reconnect-s",
        type=click.FloatRange(min=0),
        default=10.0,
        show_default=True,
        help="Seconds a server that went away (connections refused: a restart) gets to come back: "
        "a closed loop waits that long before its next request; the run stops after it (exit 6).",
    ),
    click.option("--insecure", is_flag=True, help="Do not verify TLS certificates."),
    click.option(
        "--transport",
        type=click.Choice(["lean", "aiohttp"]),
        default="lean",
        show_default=True,
        help="HTTP client: benchy's lean HTTP/1.1 client (httptools) or aiohttp (20-40% more CPU per "
        "streamed token; the reference to compare against). Both honour proxies, redirects, "
        "--header and the base URL's query string alike.",
    ),
    click.option(
        "--header",
        "-H",
        "headers",
        multiple=True,
        metavar="'NAME: VALUE'",
        help="An extra header on every request, e.g. -H 'api-key: …' (Azure); repeatable. "
        "Values are treated as secrets: never written anywhere.",
    ),
    click.option(
        "--no-env-proxy",
        is_flag=True,
        help="Ignore HTTP_PROXY / HTTPS_PROXY / NO_PROXY (by default a proxy they name is used).",
    ),
    click.option(
        "--extra-body",
        metavar="JSON|@FILE",
        default=None,
        help="Fields merged into every request body: sampling options, chat_template_kwargs, "
        "response_format… A field benchy sets itself is refused; a credential-named key's value "
        "is never written.",
    ),
    click.option(
        "--tools",
        metavar="FILE|builtin",
        default=None,
        help='Send tools: a JSON file of OpenAI function definitions (a list, or {"tools": [...]}), '
        "or `builtin` (search, read_file); converted for --endpoint responses and messages. "
        "Tool calls are output: docs/tools.md.",
    ),
    click.option(
        "--tool-choice",
        metavar="auto|required|none|NAME",
        default=None,
        help="tool_choice with --tools (required: every answer a call; NAME: that function).",
    ),
)


def _client_settings(
    base_url: str,
    model: str | None,
    api_key: str | None,
    timeout: float,
    stall_timeout: float,
    reconnect_s: float,
    insecure: bool,
    transport: str,
    headers: tuple[str, ...],
    no_env_proxy: bool,
    extra_body: str | None,
    tools: str | None = None,
    tool_choice: str | None = None,
) -> ClientSettings:
    from benchy.client.extra_body import load as load_extra_body
    from benchy.client.settings import ClientSettings, parse_header
    from benchy.workloads import tools as tool_calls

    check_url(base_url)
    base_url = api_root(base_url)
    try:
        parsed = tuple(parse_header(h) for h in headers)
        extra = load_extra_body(extra_body) if extra_body is not None else None
        listed = tool_calls.load(tools) if tools is not None else None
        if tool_choice is not None:
            tool_calls.check_choice(tool_choice, listed)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return ClientSettings(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout_s=timeout,
        stall_timeout_s=stall_timeout,
        reconnect_s=reconnect_s,
        insecure=insecure,
        transport=transport,
        headers=parsed,
        env_proxy=not no_env_proxy,
        extra_body=extra,
        tools=listed,
        tool_choice=tool_choice,
    )


# Which server to talk to and how, on every command that talks to one: `client`, a ClientSettings.
client_options = option_group("client", CLIENT_OPTIONS, _client_settings)


endpoint_option = click.option(
    "--endpoint",
    type=click.Choice(["chat", "completions", "responses", "messages"]),
    default="chat",
    show_default=True,
    help="API to send to: /v1/chat/completions (messages, the server's chat template), "
    "/v1/completions (a raw prompt, no template), /v1/responses (OpenAI's Responses API) or "
    "/v1/messages (Anthropic's Messages API); docs/engines.md says which engine serves which.",
)

# `run` also measures a pooling endpoint; capacity and probe-cache judge TTFT, which it has none of.
run_endpoint_option = click.option(
    "--endpoint",
    type=click.Choice(["chat", "completions", "responses", "messages", "embeddings", "rerank"]),
    default="chat",
    show_default=True,
    help="API to send to: /v1/chat/completions (messages, the server's chat template), "
    "/v1/completions (a raw prompt, no template), /v1/responses (OpenAI's Responses API), "
    "/v1/messages (Anthropic's Messages API), /v1/embeddings or /v1/rerank (pooling endpoints: docs/embeddings.md); "
    "docs/engines.md says which engine serves which.",
)


TEMPLATE_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--template",
        type=click.Choice(["none", "harmony"]),
        default="none",
        show_default=True,
        help="For --endpoint completions: harmony renders gpt-oss's Harmony prompt client-side, "
        "asks for special tokens (skip_special_tokens: false) and counts the analysis "
        "channel as reasoning, the final one as content; none sends the prompt as is.",
    ),
    click.option(
        "--reasoning-effort",
        type=click.Choice(["low", "medium", "high"]),
        default=None,
        help="Chat: sent as reasoning_effort; completions with --template harmony: the "
        "system message's Reasoning line (default medium there).",
    ),
)


def template_settings(template: str, reasoning_effort: str | None) -> Template:
    from benchy.load.prompts import Template

    return Template(template, reasoning_effort)


def _check_gpu_metrics(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad --gpu-metrics (neither a URL nor nvml, or nvml without nvidia-ml-py) fails here,
    before anything is sent."""
    if value is None:
        return None
    from benchy.server.gpu import GpuError, check_spec

    try:
        check_spec(value)
    except GpuError as exc:
        raise click.BadParameter(str(exc).removeprefix("--gpu-metrics "), ctx, param) from None
    return value


# Reusable by any command that sends load (run, probe-cache, capacity): the value goes to
# server/gpu.py's source_for / GpuSampler.
gpu_metrics_option = click.option(
    "--gpu-metrics",
    "gpu_metrics",
    metavar="URL|nvml",
    default=None,
    callback=_check_gpu_metrics,
    help="Sample the GPUs beside each case: a dcgm-exporter URL (http://HOST:9400/metrics) or nvml "
    "(this host's GPUs; pip install 'benchy[gpu]'): power, energy per token, bandwidth use (docs/gpu.md).",
)
