"""Images on a real vLLM (CPU build, tiny random LLaVA: tiny_vl_model.py), judged by vLLM's own
account: its multimodal processor cache's counters on /metrics (vllm:mm_cache_queries_total,
vllm:mm_cache_hits_total) and the image tokens its usage reports
(prompt_tokens_details.multimodal_tokens.image). Unique images must never hit that cache,
shared ones must; benchy's image tokens must be the server's. Opt-in: `make test-vllm`."""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.vllmserver.test_vllm_server import benchy_run, measured

pytestmark = pytest.mark.vllm

IMAGES, RUNS, WARMUP = 2, 5, 1
PER_IMAGE = 16  # (56 / 14)^2 patches of the tiny CLIP tower, whatever the picture's size


def mm_cache(server) -> tuple[float, float]:
    """(queries, hits) of vLLM's multimodal processor cache, from its /metrics."""
    with urllib.request.urlopen(f"{server.root_url}/metrics", timeout=30) as resp:
        text = resp.read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:{name}_total\{{[^}}]*\}} (\S+)$", text, re.M))

    return total("mm_cache_queries"), total("mm_cache_hits")


@pytest.mark.parametrize("shared", [False, True], ids=["unique", "shared"])
def test_unique_images_never_hit_vllms_processor_cache_and_shared_ones_do(vllm_vl_server, tmp_path, shared):
    before = mm_cache(vllm_vl_server)
    args = ["--pp", "128", "--tg", "8", "--runs", str(RUNS), "--warmup", str(WARMUP), "--images", str(IMAGES)]
    args += ["--image-size", "320x240", *(["--shared-images"] if shared else [])]
    results = benchy_run(vllm_vl_server, *args, out=tmp_path)
    queries, hits = (a - b for a, b in zip(mm_cache(vllm_vl_server), before, strict=True))
    [case] = results["cases"]
    sent = measured(case)
    assert len(sent) == RUNS and all(r["status"] == "ok" for r in sent)
    # every image of every request (the calibration's are text only) asked the cache once
    requests = RUNS + WARMUP + (1 if case.get("alone") else 0)
    assert queries >= requests * IMAGES
    if shared:  # the run's pictures, each missed once, then found every time
        assert hits == queries - IMAGES
    else:
        assert hits == 0
    for r in sent:  # the server's own count, taken as it is
        assert r["server_image_tokens"] == r["image_tokens"] == IMAGES * PER_IMAGE
        assert r["image_tokens_from"] == "server"
    assert case["images"]["image_tokens"] == IMAGES * PER_IMAGE
