"""The simulator's reading of a generation request: the body checked and planned into a Job."""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass

from aiohttp import web

from benchy.jsontypes import JsonObject
from benchy.sim import answers, prose, vocab
from benchy.sim.config import SimConfig
from benchy.sim.engine import (
    CONTENT,
    REASONING,
    Plan,
    message_text,
    plan_harmony,
    plan_output,
    prompt_hash,
    reasoning_dropped,
    render_chat,
    spec_steps,
    think_tokens,
)
from benchy.sim.tools import ToolAnswer, ToolRequestError, plan_calls, requested_calls

JSON_TYPE = "application/json"
ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 500: "InternalServerError"}
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # the OpenAI/vLLM default for /v1/completions


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(status: int, message: str) -> bytes:
    error = {"message": message, "type": ERROR_TYPES.get(status, "Error"), "code": status}
    return json.dumps({"object": "error", "error": error}).encode()


@dataclass
class Job:
    """One parsed generation request."""

    endpoint: str  # "chat" | "completions"
    stream: bool
    include_usage: bool
    model: str
    prompt_ids: list[int]
    plan: Plan
    reasoning: int  # leading plan tokens that are reasoning_content
    response_id: str
    created: int
    skip_special_tokens: bool = True  # --harmony completions: drop the markers from `text`
    prompt_tokens_sent: int = 0  # before --truncate-prompt
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: usage in every chunk
    steps: list[int] | None = None  # --spec-draft: tokens per decode step
    think: int = 0  # --think-inline: tokens of the think block, its tags included
    first_content: int | None = None  # index of the first answer token (None: no answer)
    tools: ToolAnswer | None = None  # sent tools, the answer's calls (sim/tools.py)
    reasoning_dropped: int = 0  # --reasoning-last-turn: earlier assistant messages rendered without their reasoning
    # /v1/completions with echo and logprobs: the prompt's pieces and their log-probabilities
    echo: tuple[list[str], list[float]] | None = None
    image_tokens: int | None = None  # --image-token-details: the images' tokens, reported in usage


async def read_json(request: web.Request) -> JsonObject:
    try:
        body = json.loads(await request.read())
    except ValueError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def check_model(cfg: SimConfig, body: JsonObject) -> str:
    model = body.get("model") or cfg.model
    if model != cfg.model:
        raise ApiError(404, f"The model `{model}` does not exist.")
    return model


def prompt_text(body: JsonObject, endpoint: str, reasoning_last_turn: bool = False) -> str:
    if endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "'messages' must be a non-empty list of objects")
        return render_chat(messages, reasoning_last_turn)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string")
    return prompt


def int_field(body: JsonObject, name: str, default: int, minimum: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ApiError(400, f"'{name}' must be an integer >= {minimum}")
    return value


def stop_strings(body: JsonObject) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise ApiError(400, "'stop' must be a string or a list of strings")


_PARSED = itertools.count()  # completion requests parsed so far (--hidden-prompt-every)
_HARMONY_USER = re.compile(r"<\|start\|>user<\|message\|>(.*?)<\|end\|>", re.S)
_HARMONY_EFFORT = re.compile(r"\A<\|start\|>system<\|message\|>[^<]*?^Reasoning: (\w+)$", re.M)


def user_text(body: JsonObject, endpoint: str) -> str:
    """The user's own words: the last user message, also inside a Harmony-rendered prompt."""
    if endpoint == "chat":
        users = [m for m in body["messages"] if m.get("role", "user") == "user"]
        return message_text(users[-1].get("content")) if users else render_chat(body["messages"])
    prompt = prompt_text(body, endpoint)
    found = _HARMONY_USER.findall(prompt)
    return found[-1] if found else prompt


def requested_effort(body: JsonObject, endpoint: str) -> str | None:
    """Chat: the reasoning_effort field; completions: a Harmony system message's Reasoning line."""
    if endpoint == "chat":
        effort = body.get("reasoning_effort")
        return effort if isinstance(effort, str) else None
    match = _HARMONY_EFFORT.search(prompt_text(body, endpoint))
    return match.group(1) if match else None


def bool_field(body: JsonObject, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false")
    return value


def parse_job(cfg: SimConfig, body: JsonObject, endpoint: str, response_id: str) -> Job:
    model = check_model(cfg, body)
    prompt_ids = vocab.encode(prompt_text(body, endpoint, cfg.reasoning_last_turn))
    if cfg.hidden_prompt_tokens and next(_PARSED) % cfg.hidden_prompt_every == cfg.hidden_prompt_every - 1:
        prompt_ids = vocab.encode(" hidden" * cfg.hidden_prompt_tokens) + prompt_ids  # a prompt of its own
    sent = len(prompt_ids)
    if cfg.truncate_prompt and sent > cfg.truncate_prompt:
        prompt_ids = prompt_ids[-cfg.truncate_prompt :]  # the last N tokens, as Ollama keeps them
    room = cfg.context_length - len(prompt_ids)
    if room < 1:
        raise ApiError(
            400,
            f"This model's maximum context length is {cfg.context_length} tokens; the prompt has {len(prompt_ids)}.",
        )
    default_max = room if endpoint == "chat" else min(room, COMPLETIONS_DEFAULT_MAX_TOKENS)
    max_tokens = int_field(body, "max_completion_tokens", 0, 1) or int_field(body, "max_tokens", default_max, 1)
    if max_tokens > room:
        raise ApiError(
            400,
            f"This model's maximum context length is {cfg.context_length} tokens; "
            f"{len(prompt_ids)} prompt + {max_tokens} completion tokens exceed it.",
        )
    planner = plan_harmony if cfg.harmony else plan_output
    plan = planner(
        cfg,
        vocab.encode(user_text(body, endpoint)) if cfg.harmony else prompt_ids,
        max_tokens,
        min_tokens=0 if cfg.ignore_ignore_eos else int_field(body, "min_tokens", 0, 0),
        ignore_eos=bool(body.get("ignore_eos", False)) and not cfg.ignore_ignore_eos,
        stop=stop_strings(body),
    )
    if cfg.answers and not cfg.harmony:
        plan = _answered(plan, user_text(body, endpoint))
    options = body.get("stream_options") or {}
    options = options if isinstance(options, dict) and not cfg.ignore_stream_options else {}
    reasoning = min(cfg.reasoning_tokens, plan.n) if endpoint == "chat" and not cfg.think_inline else 0
    think = think_tokens(cfg, plan.n)
    first_content = think or reasoning
    if plan.kinds is not None:
        reasoning = plan.kinds.count(REASONING)
        first_content = plan.kinds.index(CONTENT) if CONTENT in plan.kinds else plan.n
    plan, answer = _with_tool_calls(cfg, body, endpoint, plan, reasoning)
    return Job(
        endpoint=endpoint,
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage")),
        model=model,
        prompt_ids=prompt_ids,
        plan=plan,
        reasoning=reasoning,
        response_id=response_id,
        created=int(time.time()),
        skip_special_tokens=bool_field(body, "skip_special_tokens", True),
        prompt_tokens_sent=sent,
        reasoning_dropped=reasoning_dropped(body["messages"]) if cfg.reasoning_last_turn and endpoint == "chat" else 0,
        continuous_usage=bool(options.get("include_usage") and options.get("continuous_usage_stats")),
        steps=spec_steps(cfg, plan.n, prompt_hash(prompt_ids)) if cfg.spec_draft else None,
        think=think,
        first_content=first_content if first_content < plan.n else None,
        tools=answer,
        echo=_echo(cfg, body, endpoint),
    )


def _with_tool_calls(
    cfg: SimConfig, body: JsonObject, endpoint: str, plan: Plan, reasoning: int
) -> tuple[Plan, ToolAnswer | None]:
    """Sent tools, the tokens after the reasoning are calls (sim/tools.py), and an answer
    that ended on its own ends by `tool_calls`. Chat only (Responses and Messages come as
    chat); not with --harmony or --think-inline, whose answers are their own."""
    try:
        names = requested_calls(body, cfg.tool_calls) if endpoint == "chat" else None
    except ToolRequestError as exc:
        raise ApiError(400, str(exc)) from None
    if not names or plan.kinds is not None or cfg.think_inline or plan.n <= reasoning:
        return plan, None
    texts, answer = plan_calls(names, plan.texts[reasoning:], reasoning)
    finish = "tool_calls" if plan.finish_reason == "stop" else plan.finish_reason
    return Plan(plan.texts[:reasoning] + texts, finish), answer


def _echo(cfg: SimConfig, body: JsonObject, endpoint: str) -> tuple[list[str], list[float]] | None:
    """A non-streamed completion asked with echo and logprobs (vLLM's, OpenAI's legacy API):
    the prompt's pieces and the log-probability --output's model gives each (prose.logprobs)."""
    if endpoint != "completions" or body.get("stream") or not body.get("echo") or body.get("logprobs") is None:
        return None
    text = prompt_text(body, endpoint)
    return vocab.pieces(text), prose.logprobs(cfg.output, vocab.encode(text), cfg.degraded_share)


def _answered(plan: Plan, question: str) -> Plan:
    """--answers: the question's right answer, ended by a stop, where it can be worked out
    (sim/answers.py); the planned prose otherwise."""
    said = answers.answer(question)
    if said is None:
        return plan
    return Plan(vocab.pieces(said), "stop")
