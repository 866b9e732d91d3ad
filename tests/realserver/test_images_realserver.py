"""--images against a real llama.cpp server with a multimodal projector (xllamacpp, the tiny
model and tiny_mmproj.py's random LLaVA-shaped projector): the server really decodes, resizes
and encodes each picture (its mtmd library), so benchy's image figures are judged against a
real engine's own count: every picture is tiny_mmproj.tokens_per_image() tokens whatever its
size, the text beside it stays exactly --pp tokens, a corrupt picture is refused and recorded
as a failed request, and llama.cpp, which keeps no image cache apart from its prefix cache,
is never found caching image work by `probe-cache --images`.

Run alone: `pytest -m realserver tests/realserver/test_images_realserver.py`.
"""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path

import pytest

from benchy.load import images
from tests.conftest import post_chat, run_benchy

pytestmark = pytest.mark.realserver

_spec = importlib.util.spec_from_file_location("benchy_tiny_mmproj", Path(__file__).resolve().parent / "tiny_mmproj.py")
tiny_mmproj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_mmproj)
PER_IMAGE = tiny_mmproj.tokens_per_image()


@pytest.fixture(scope="module")
def vision_server(llama_server_factory, tiny_model_path):
    mmproj = tiny_mmproj.build(tiny_model_path.with_name("tiny-mmproj.gguf"))
    return llama_server_factory(parallel=2, extra_args=("--mmproj", str(mmproj)))


def _chat(server, *urls: str) -> tuple[int, dict]:
    parts = [{"type": "text", "text": "look"}, *({"type": "image_url", "image_url": {"url": u}} for u in urls)]
    return post_chat(
        server.base_url, {"model": server.model, "max_tokens": 2, "messages": [{"role": "user", "content": parts}]}
    )


def test_the_server_counts_each_picture_the_same_whatever_its_size(vision_server):
    """The witness itself: usage grows by PER_IMAGE tokens a picture (llama.cpp resizes every
    picture to the tower's square), and a corrupt picture is refused."""
    status, plain = _chat(vision_server)
    assert status == 200
    for sizes in ((64, 64), (300, 40), (20, 200)):
        status, body = _chat(vision_server, images.data_url(images.draw(*sizes, "a b")))
        assert status == 200 and body["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + PER_IMAGE
    png = images.draw(64, 64, "a b")
    status, _ = _chat(vision_server, "data:image/png;base64," + base64.b64encode(png[: len(png) // 2]).decode())
    assert status >= 400


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_image_tokens_are_the_servers_and_the_text_stays_exact(vision_server, endpoint):
    pp, n = 96, 2
    proc = run_benchy(
        "run", "--base-url", vision_server.base_url, "--quiet", "--format", "json", "--endpoint", endpoint,
        "--pp", str(pp), "--tg", "4", "-c", "1", "2", "--runs", "2", "--images", str(n), "--image-size", "120x80",
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_failed"] == 0 and len(reqs) == 2 * case["concurrency"]
        for r in reqs:
            assert r["images"] == n and r["image_tokens"] == n * PER_IMAGE
            assert r["prompt_tokens"] == pp + n * PER_IMAGE  # the text exactly --pp beside the pictures
        assert case["images"]["image_tokens"] == n * PER_IMAGE and case["images"]["text_prompt_tokens"] == pp


def test_the_server_fetches_pictures_from_benchys_own_host(vision_server):
    """--image-url: llama.cpp downloads each picture from benchy's host on 127.0.0.1."""
    proc = run_benchy(
        "run", "--base-url", vision_server.base_url, "--quiet", "--format", "json", "--pp", "64", "--tg", "4",
        "-c", "1", "--runs", "3", "--images", "2", "--image-size", "64x64", "--image-url", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [case] = json.loads(proc.stdout)["cases"]
    assert case["n_failed"] == 0 and case["images"]["image_tokens"] == 2 * PER_IMAGE and case["images"]["counted"] == 3


def test_the_image_probe_runs_on_a_real_engine(vision_server, tmp_path):
    """The probe's requests as a real engine counts them: every picture PER_IMAGE tokens, every
    text the same exact length on both sides, a verdict with its figures. (Which verdict is not
    asserted: llama.cpp keeps no image cache apart from its prefix cache, so a repeat is only
    noise faster, and a test at alpha 0.05 would call noise a cache once in twenty runs; the
    simulator's tests judge the verdict against its truth log.)"""
    out = tmp_path / "probe"
    proc = run_benchy(
        "probe-cache", "--base-url", vision_server.base_url, "--images", "--image-size", "64x64", "-n", "6",
        "-q", "-o", str(out), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads((out / "probe.json").read_text())["images"]
    assert probe["n_failed"] == 0 and probe["image_tokens"] == PER_IMAGE
    sides = probe["shared"]["prompt_tokens"] + probe["unique"]["prompt_tokens"]
    assert len(sides) == 12 and len(set(sides)) == 1  # one exact text and one picture's tokens, each request
    assert probe["verdict"] in ("detected", "not_detected", "inconclusive") and probe["speedup"] is not None
