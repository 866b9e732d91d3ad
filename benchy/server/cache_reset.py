"""`--cache-reset`: empty the server's prefix cache before each case, through the engine's own
endpoint, so that every case starts cold and its reuse is its own.

Why: benchy's nonces keep measured prompts from hitting what an earlier case (or run) left in
the cache, but not the cache's *fill*: a case that starts with a full cache evicts from the
first request, while the same case on an empty one does not. A cold start on demand makes a
case's eviction and capacity figures its own. Each engine offers it in its own way:

  vLLM       POST /reset_prefix_cache
  SGLang     POST /flush_cache
  llama.cpp  POST /slots/{id}?action=erase, for every slot /props lists; llama-server answers
             it only when started with --slot-save-path DIR (HTTP 501 otherwise), and its
             host-RAM prompt cache (--cache-ram) is not erased by it
  benchy-sim the vLLM endpoint, or llama.cpp's with --flavor llamacpp

An engine benchy does not recognise is offered vLLM's and SGLang's endpoints in turn. Where
none answers, the outcome says so plainly and the run goes on without resets. Behind a router
(nginx, a Kubernetes Service) each call reaches one replica, so the outcome names the engine's
endpoint, never a promise that every replica was emptied.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from benchy.jsontypes import Saved
from benchy.server.identity import LLAMACPP, SGLANG, SIM, VLLM, ServerIdentity, root_url
from benchy.server.pages import PageSource, outcome

RESET_TIMEOUT_S = 30.0
VLLM_RESET, SGLANG_RESET = "/reset_prefix_cache", "/flush_cache"


@dataclass(frozen=True, slots=True)
class CacheReset(Saved):
    """One reset (or the finding that the server offers none)."""

    ok: bool
    endpoint: str | None  # "POST /reset_prefix_cache", or None when there is none
    message: str
    calls: int = 0  # HTTP calls made (llama.cpp: one per slot)


def endpoints_for(identity: ServerIdentity) -> list[str] | None:
    """The reset paths to try, in order; None: llama.cpp's per-slot erase."""
    if identity.engine == LLAMACPP or (identity.engine == SIM and identity.answered.get("/props") == 200):
        return None
    if identity.engine in (VLLM, SIM):
        return [VLLM_RESET]
    if identity.engine == SGLANG:
        return [SGLANG_RESET]
    return [VLLM_RESET, SGLANG_RESET]


async def reset(pages: PageSource, base_url: str, identity: ServerIdentity) -> CacheReset:
    """Empties the prefix cache once; never raises for a server that cannot."""
    root = root_url(base_url)
    paths = endpoints_for(identity)
    if paths is None:
        return await _erase_slots(pages, root, identity.slots or 1)
    answers: list[str] = []
    for path in paths:
        status = await _post(pages, root + path)
        if status == 200:
            return CacheReset(True, f"POST {path}", f"prefix cache emptied by POST {path}", len(answers) + 1)
        answers.append(f"POST {path}: {status}")
    engine = identity.engine or "this server"
    return CacheReset(
        False,
        None,
        f"{engine} has no prefix-cache reset endpoint benchy knows ({'; '.join(answers)}): cases run on a warm cache",
        len(answers),
    )


async def _erase_slots(pages: PageSource, root: str, slots: int) -> CacheReset:
    statuses = await asyncio.gather(*(_post(pages, f"{root}/slots/{i}?action=erase") for i in range(slots)))
    endpoint = "POST /slots/{id}?action=erase"
    failed = [f"slot {i}: {s}" for i, s in enumerate(statuses) if s != 200]
    if not failed:
        return CacheReset(True, endpoint, f"{slots} slot(s) erased (a host-RAM prompt cache, if on, is not)", slots)
    return CacheReset(
        False,
        None,
        f"llama.cpp slot erase failed ({'; '.join(failed)}; llama-server allows it only with --slot-save-path DIR): "
        "cases run on a warm cache",
        slots,
    )


async def _post(pages: PageSource, url: str) -> int | str:
    """The HTTP status of an empty POST, or the failure's kind (connect, timeout, reset…)."""
    return outcome(await pages.page("POST", url, None, RESET_TIMEOUT_S))
