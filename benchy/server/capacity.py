"""What the server says its KV cache holds, in tokens, set beside what `probe-cache --capacity`
measures: a stated size is an upper bound on reuse (prompts in flight, fragmentation and the
engine's own reserve take part of it), the measured cliff is what reuse really gets.

  vLLM       /metrics vllm:cache_config_info: num_gpu_blocks × block_size
  SGLang     /get_server_info max_total_num_tokens
  llama.cpp  /props n_ctx (per slot) × total_slots: the slots' own KV cells; a host-RAM prompt
             cache (--cache-ram, on by default) holds more, in MiB the server does not state
  benchy-sim as the flavour it imitates

Nothing here raises: a size nobody states is None, with the reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchy.server.identity import LLAMACPP, PROBE_TIMEOUT_S, SGLANG, ServerIdentity, root_url
from benchy.server.pages import PageSource, json_of, text_of


@dataclass
class StatedCapacity:
    tokens: int | None
    source: str | None = None
    reason: str | None = None  # why tokens is None, or what it leaves out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_vllm_metrics(text: str) -> StatedCapacity | None:
    """num_gpu_blocks × block_size of vllm:cache_config_info, if the exposition has it."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return None
    for family in families:
        for sample in family.samples:
            if sample.name.startswith("vllm:cache_config_info"):
                blocks, size = sample.labels.get("num_gpu_blocks"), sample.labels.get("block_size")
                if blocks and size and blocks.isdigit() and size.isdigit():
                    return StatedCapacity(
                        int(blocks) * int(size), f"/metrics vllm:cache_config_info: {blocks} blocks × {size} tokens"
                    )
    return None


def from_llamacpp_props(props: dict[str, Any]) -> StatedCapacity | None:
    n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
    slots = props.get("total_slots")
    if not isinstance(n_ctx, int) or not isinstance(slots, int):
        return None
    return StatedCapacity(
        n_ctx * slots,
        f"/props n_ctx {n_ctx} × total_slots {slots}",
        "the slots' KV cells only: a host-RAM prompt cache (--cache-ram) may hold more",
    )


def from_sglang_info(info: dict[str, Any]) -> StatedCapacity | None:
    tokens = info.get("max_total_num_tokens")
    return StatedCapacity(tokens, "/get_server_info max_total_num_tokens") if isinstance(tokens, int) else None


async def stated_capacity(pages: PageSource, base_url: str, identity: ServerIdentity) -> StatedCapacity:
    root = root_url(base_url)
    if identity.engine == LLAMACPP or identity.answered.get("/props") == 200:
        found = from_llamacpp_props(await _json(pages, f"{root}/props"))
    elif identity.engine == SGLANG:
        found = from_sglang_info(await _json(pages, f"{root}/get_server_info"))
    else:
        found = from_vllm_metrics(text_of(await pages.page("GET", f"{root}/metrics", None, PROBE_TIMEOUT_S)) or "")
    if found is not None:
        return found
    return StatedCapacity(
        None,
        reason="the server states no KV cache size (vLLM /metrics cache_config_info, SGLang "
        "/get_server_info max_total_num_tokens, llama.cpp /props n_ctx × total_slots)",
    )


async def _json(pages: PageSource, url: str) -> dict[str, Any]:
    value = json_of(await pages.page("GET", url, None, PROBE_TIMEOUT_S))
    return value if isinstance(value, dict) else {}
