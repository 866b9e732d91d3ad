"""Sends the canary (`--canary`, issue 55) before the sweep: each fixed prompt once, greedily,
then the fixed passage to /v1/completions with echo and logprobs. What the prompts are, how an
answer is judged and what a perplexity is are measure/sanity/canary.py's; this only sends.
A failed canary request is kept with its error, never raised: it must not stop the run.
"""

from __future__ import annotations

import secrets

from benchy.client.client import Client
from benchy.measure.sanity.canary import (
    MAX_TOKENS,
    PASSAGE,
    Canary,
    CanaryAnswer,
    Prompt,
    answered,
    perplexity_of,
    prompts,
)


async def run(client: Client, endpoint: str) -> Canary:
    nonce = "CANARY-" + secrets.token_hex(4).upper()
    answers = [await _ask(client, endpoint, p, nonce) for p in prompts(nonce)]  # one at a time, in order
    perplexity, tokens, unavailable = await _perplexity(client)
    return Canary(endpoint, answers, perplexity, tokens, unavailable)


async def _ask(client: Client, endpoint: str, p: Prompt, nonce: str) -> CanaryAnswer:
    try:
        text, _, finish = await client.answer_of(p.text, endpoint, MAX_TOKENS, {"temperature": 0})
    except Exception as exc:  # a refusal or a transport failure: the answer says which
        return CanaryAnswer(p.name, p.text, p.expected, error=client.scrub(str(exc))[:300])
    return answered(p, text, finish, nonce)


async def _perplexity(client: Client) -> tuple[float | None, int | None, str | None]:
    """vLLM, SGLang and OpenAI's legacy API echo the prompt's log-probabilities; others do not."""
    body = {
        "model": client.settings.model,
        "prompt": PASSAGE,
        "max_tokens": 1,
        "temperature": 0,
        "echo": True,
        "logprobs": 1,
    }
    page = await client.page("POST", client.url("completions"), body)
    if page.failure or page.status != 200:
        return None, None, f"/v1/completions with echo and logprobs: {page.message or f'HTTP {page.status}'}"
    return perplexity_of(page.body)
