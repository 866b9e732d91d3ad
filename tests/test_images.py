"""--images (issue 56), judged by the simulator's truth log: every image is decoded for real by
the simulator (Pillow: format and true size), unique images never hit its encoder cache and
shared ones do, and benchy's image counts, bytes and tokens are what the server saw and counted
on each of chat, Responses and Messages — the text's prompt length staying exact beside them."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import statistics
import urllib.error
import urllib.request

import pytest
from PIL import Image

from benchy.client import images as client_images
from benchy.load import images
from benchy.measure import images as measure_images
from benchy.measure import request_formulas
from benchy.measure.unavailable import Unavailable
from benchy.records.plan import Tagged
from tests.conftest import SimSince, post_chat, run_benchy_here, run_json, shared_sim, warning_codes

sim_fixture = shared_sim("--prefill-tps", "20000", "--decode-tps", "400", "--image-encode-tps", "20000")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


def _measured(results: dict) -> list[dict]:
    return [r for c in results["cases"] for r in c["requests"] if not r["warmup"]]


def _tokens(width: int, height: int, patch: int = 28) -> int:
    return math.ceil(width / patch) * math.ceil(height / patch)


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_unique_images_never_hit_and_their_tokens_are_the_servers(sim, tmp_path, endpoint):
    pp = 64
    results = run_json(
        sim, tmp_path, "--endpoint", endpoint, *f"--pp {pp} --tg 8 -c 2 --runs 2 --images 2 --image-size 90x60".split()
    )
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    assert warning_codes(results, truth=truth) == set()
    reqs = _measured(results)
    assert len(reqs) == 4
    hashes = []
    for r in reqs:
        t = truth[r["request_id"]]
        assert [(i["width"], i["height"], i["format"]) for i in t["images"]] == [(90, 60, "PNG")] * 2
        assert not any(i["hit"] for i in t["images"]) and all(i["encode_s"] > 0 for i in t["images"])
        hashes += [i["sha256"] for i in t["images"]]
        assert r["images"] == 2 and r["image_bytes"] == sum(i["bytes"] for i in t["images"])
        assert r["image_tokens"] == t["image_tokens"] == 2 * _tokens(90, 60)
        assert r["image_tokens_from"] == "usage_minus_text"
        assert r["prompt_tokens"] == t["prompt_tokens"] == pp + t["image_tokens"]  # the text exact beside them
    assert len(set(hashes)) == len(hashes)  # warmups' too: no image was ever sent twice
    warm = [truth[r["request_id"]] for c in results["cases"] for r in c["requests"] if r["warmup"]]
    assert not any(i["hit"] for t in warm for i in t["images"])
    shape = {"count": 2, "width": 90, "height": 60, "shared": False, "served_as": "data"}
    assert results["setup"]["load"]["images"] == shape
    [case] = results["cases"]
    assert case["images"]["images_per_request"] == 2 and case["images"]["counted"] == 4
    assert case["images"]["image_tokens"] == 2 * _tokens(90, 60) and case["images"]["text_prompt_tokens"] == pp
    assert case["summary"]["prefill_tps"]["n"] == 4  # the text's length held: no row withheld


def test_shared_images_hit_the_encoder_cache(sim, tmp_path):
    results = run_json(
        sim, tmp_path, *"--pp 64 --tg 4 -c 1 --runs 4 --images 1 --image-size 56x56 --shared-images".split()
    )
    sent = {r["request_id"] for c in results["cases"] for r in c["requests"]}  # warmups too
    order = sorted((t for t in sim.truth() if t["request_id"] in sent), key=lambda t: t["arrival_s"])
    seen = [i for t in order for i in t["images"]]
    assert len(seen) == len(sent) == 5
    assert len({i["sha256"] for i in seen}) == 1  # one picture, every time
    assert not seen[0]["hit"] and all(i["hit"] and i["encode_s"] == 0 for i in seen[1:])
    assert all(r["image_tokens"] == _tokens(56, 56) for r in _measured(results))
    again = run_json(
        sim, tmp_path, *"--pp 64 --tg 4 -c 1 --runs 1 --images 1 --image-size 56x56 --shared-images".split()
    )
    [first] = [t for t in sim.truth() if t["request_id"] == again["cases"][0]["requests"][0]["request_id"]]
    assert first["images"][0]["sha256"] != seen[0]["sha256"] and not first["images"][0]["hit"]  # each run its own


def test_the_servers_own_image_count_is_taken_and_the_text_checked(start_sim, tmp_path):
    sim = start_sim("--image-token-details", "--prefill-tps", "20000")
    results = run_json(sim, tmp_path, *"--pp 48 --tg 4 -c 1 --runs 2 --images 3 --image-size 30x100".split())
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    for r in _measured(results):
        assert r["image_tokens_from"] == "server" and r["server_image_tokens"] == truth[r["request_id"]]["image_tokens"]
        assert r["image_tokens"] == 3 * _tokens(30, 100)
    assert results["cases"][0]["images"]["image_tokens_from"] == "server"


def test_without_the_cache_shared_images_are_encoded_every_time(start_sim, tmp_path):
    sim = start_sim("--no-image-cache", "--prefill-tps", "20000")
    results = run_json(
        sim, tmp_path, *"--pp 64 --tg 4 -c 1 --runs 3 --images 1 --image-size 56x56 --shared-images".split()
    )
    sent = {r["request_id"] for c in results["cases"] for r in c["requests"]}
    seen = [i for t in sim.truth() if t["request_id"] in sent for i in t["images"]]
    assert len(seen) >= 3 and len({i["sha256"] for i in seen}) == 1 and not any(i["hit"] for i in seen)


def _post(sim, body: dict) -> tuple[int, dict]:
    return post_chat(sim.base_url, body)


def _png(width: int, height: int, kind: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format=kind)
    return out.getvalue()


def _chat(*urls: str) -> dict:
    parts = [{"type": "text", "text": "look"}, *({"type": "image_url", "image_url": {"url": u}} for u in urls)]
    return {"model": "benchy-sim", "max_tokens": 2, "messages": [{"role": "user", "content": parts}]}


def test_the_simulator_decodes_images_as_a_processor_does(sim):
    """Its true size gives the tokens (not anything the request says), and what a processor
    cannot decode is refused: a truncated PNG, bytes that are no image, a format it takes not."""
    status, body = _post(sim, _chat(images.data_url(_png(57, 29))))
    assert status == 200 and body["usage"]["prompt_tokens"] == len(["look"]) + _tokens(57, 29) + _template(sim)
    whole = _png(64, 64)
    for bad, words in (
        (whole[: len(whole) // 2], "cannot be decoded"),
        (b"not an image at all", "cannot be decoded"),
        (_png(8, 8, "BMP"), "BMP is not one of"),
    ):
        status, body = _post(sim, _chat("data:image/png;base64," + base64.b64encode(bad).decode()))
        assert status == 400 and words in body["error"]["message"]
    status, body = _post(sim, _chat("http://example.com/cat.png"))  # the simulator reaches nowhere but loopback
    assert status == 400 and "loopback" in body["error"]["message"]


def _template(sim) -> int:
    """The chat template's tokens around a one-word message (the same request without an image)."""
    status, body = _post(
        sim, {"model": "benchy-sim", "max_tokens": 2, "messages": [{"role": "user", "content": "look"}]}
    )
    assert status == 200
    return body["usage"]["prompt_tokens"] - 1


def test_each_api_carries_the_images_its_own_way():
    urls = [images.data_url(_png(4, 4)), "http://127.0.0.1:9/x.png"]
    chat = client_images.attach({"messages": [{"role": "user", "content": "hi"}]}, "chat", urls)
    assert chat["messages"][0]["content"][0] == {"type": "text", "text": "hi"}
    assert [p["image_url"]["url"] for p in chat["messages"][0]["content"][1:]] == urls
    resp = client_images.attach({"input": "hi"}, "responses", urls)["input"][0]
    assert resp["type"] == "message" and [p["type"] for p in resp["content"]] == [
        "input_text",
        "input_image",
        "input_image",
    ]
    blocks = client_images.attach({"messages": [{"role": "user", "content": "hi"}]}, "messages", urls)["messages"][0]
    first, second, text = blocks["content"]
    assert first["source"]["type"] == "base64" and first["source"]["media_type"] == "image/png"
    assert base64.b64decode(first["source"]["data"]) == _png(4, 4)
    assert second["source"] == {"type": "url", "url": urls[1]} and text == {"type": "text", "text": "hi"}


def test_each_image_is_its_nonces_own():
    a, b = images.draw(64, 32, "alpha beta"), images.draw(64, 32, "alpha betb")
    assert a != b and images.draw(64, 32, "alpha beta") == a
    with Image.open(io.BytesIO(a)) as image:
        assert image.format == "PNG" and image.size == (64, 32)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--images", "1", "--endpoint", "completions"), "--images needs plain cases"),
        (("--images", "1", "--turns", "2"), "--images needs plain cases"),
        (("--images", "1", "--image-size", "448"), "--image-size must be WxH"),
        (("--images", "1", "--image-size", "0x10"), "--image-size must be WxH"),
        (("--shared-images",), "need --images N"),
    ],
)
def test_bad_image_flags_are_one_line_errors(sim, tmp_path, args, words):
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "out"), *args)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("flags", "verdict"), [((), "detected"), (("--no-image-cache",), "not_detected")])
def test_the_image_probe_finds_the_cache_where_there_is_one(start_sim, tmp_path, flags, verdict):
    """probe-cache --images: the same image again against unique ones of the same size; the
    truth log shows which repeats the encoder cache served, and the verdict follows it."""
    sim = start_sim("--prefill-tps", "20000", "--image-encode-tps", "500", *flags)  # encoding most of a TTFT
    out = tmp_path / "probe"
    proc = run_benchy_here(
        "probe-cache",
        "--base-url",
        sim.base_url,
        "--images",
        "--image-size",
        "224x224",
        "-n",
        "8",
        "-q",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    probe = json.loads((out / "probe.json").read_text())["images"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    shared = [truth[r] for r in probe["shared"]["request_ids"]]
    unique = [truth[r] for r in probe["unique"]["request_ids"]]
    assert not any(i["hit"] for t in unique for i in t["images"])  # unique images never hit
    assert [i["hit"] for t in shared[1:] for i in t["images"]] == [not flags] * 7  # repeats hit where it caches
    assert probe["verdict"] == verdict and probe["image_tokens"] == _tokens(224, 224)
    assert probe["shared"]["prompt_tokens"] == [t["prompt_tokens"] for t in shared]
    assert len({t["prompt_tokens"] - t["image_tokens"] for t in shared + unique}) == 1  # each text exactly as long
    if verdict == "detected":
        # what it saves is the encoding the truth log shows the unique ones paying (give or take the client's jitter)
        encode = statistics.median(t["images"][0]["encode_s"] for t in unique)
        assert probe["saved_s"] == pytest.approx(encode, rel=0.5) and "caches image processing" in proc.stdout
    else:
        assert "no image cache found" in proc.stdout
    rebuilt = run_benchy_here("rebuild", str(out))  # the bundle alone gives the same verdict
    assert rebuilt.returncode == 0 and json.loads((out / "probe.json").read_text())["images"]["verdict"] == verdict


def test_bad_image_probe_flags_are_one_line_errors(sim, tmp_path):
    for args, words in (
        (("--images", "--lengths", "100"), "--images replaces the per-length probe"),
        (("--images", "--endpoint", "completions"), "/v1/completions takes no image"),
        (("--image-size", "64x64"), "--image-size needs --images"),
    ):
        proc = run_benchy_here("probe-cache", "--base-url", sim.base_url, "-q", *args)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


def test_image_urls_are_served_by_benchys_own_host_on_loopback(sim, tmp_path):
    """--image-url: the server fetches each image from benchy's host on 127.0.0.1 (the very
    bytes benchy counted), and the host is gone once the run ends."""
    results = run_json(sim, tmp_path, *"--pp 64 --tg 4 -c 2 --runs 2 --images 2 --image-size 64x64 --image-url".split())
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    reqs = _measured(results)
    sources = [i["source"] for r in reqs for i in truth[r["request_id"]]["images"]]
    assert len(set(sources)) == len(sources) == 8 and all(s.startswith("http://127.0.0.1:") for s in sources)
    assert all(r["image_bytes"] == sum(i["bytes"] for i in truth[r["request_id"]]["images"]) for r in reqs)
    assert all(r["image_tokens"] == 2 * _tokens(64, 64) for r in reqs)
    assert results["setup"]["load"]["images"]["served_as"] == "url"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(sources[0], timeout=5)


def _llava(folder) -> list[bytes]:
    """A tiny ShareGPT-4V / LLaVA-style dataset: two entries naming PNG files beside it (one in
    a subfolder, as COCO paths are), one with a data URL; the pictures' bytes, in order."""
    pictures = [_png(40, 90), _png(120, 30), _png(60, 60)]
    (folder / "coco").mkdir()
    (folder / "coco" / "a.png").write_bytes(pictures[0])
    (folder / "b.png").write_bytes(pictures[1])
    rows = [
        {"id": "1", "image": "coco/a.png", "conversations": [
            {"from": "human", "value": "<image>\nWhat colour is the bus?"}, {"from": "gpt", "value": "Red."}]},
        {"id": "2", "image": "b.png", "conversations": [
            {"from": "human", "value": "Describe the scene.\n<image>"}, {"from": "gpt", "value": "A street."}]},
        {"id": "3", "image": images.data_url(pictures[2]), "conversations": [
            {"from": "human", "value": "<image>\nHow many cats?"}, {"from": "gpt", "value": "Two."}]},
    ]  # fmt: skip
    (folder / "llava.json").write_text(json.dumps(rows))
    return pictures


def test_a_datasets_images_are_sent_as_they_are(start_sim, tmp_path):
    sim = start_sim("--image-token-details", "--prefill-tps", "20000")
    pictures = _llava(tmp_path)
    results = run_json(sim, tmp_path, "--dataset", str(tmp_path / "llava.json"), *"--tg 4 -c 1 --runs 3".split())
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    reqs = _measured(results)
    assert len(reqs) == 3 and all(r["status"] == "ok" for r in reqs)  # each entry once
    wanted = {hashlib.sha256(p).hexdigest(): p for p in pictures}
    for r in reqs:
        [seen] = truth[r["request_id"]]["images"]
        assert seen["sha256"] in wanted  # the file's very bytes
        assert r["images"] == 1 and r["image_bytes"] == len(wanted[seen["sha256"]]) == seen["bytes"]
        assert r["image_tokens"] == seen["tokens"] == _tokens(seen["width"], seen["height"])
        assert r["image_tokens_from"] == "server"
    assert len({truth[r["request_id"]]["images"][0]["sha256"] for r in reqs}) == 3  # every entry's own picture


def test_a_datasets_image_fields_are_read_with_its_text():
    """Paths resolved against the file's folder, data URLs kept, the `<image>` markers gone."""
    import tempfile
    from pathlib import Path

    from benchy.workloads import dataset

    folder = Path(tempfile.mkdtemp())
    pictures = _llava(folder)
    entries = dataset.load(str(folder / "llava.json")).entries
    assert [e.prompt for e in entries] == ["What colour is the bus?", "Describe the scene.\n", "How many cats?"]
    assert entries[0].images == (str((folder / "coco" / "a.png").resolve()),)
    assert entries[2].images == (images.data_url(pictures[2]),)


def test_a_datasets_images_without_the_servers_count_give_no_image_tokens(sim, tmp_path):
    """A dataset prompt has no exact length: usage less a target would be no count at all."""
    _llava(tmp_path)
    results = run_json(sim, tmp_path, "--dataset", str(tmp_path / "llava.json"), *"--tg 4 -c 1 --runs 3".split())
    reqs = _measured(results)
    assert reqs and all(r["images"] == 1 and r.get("image_tokens") is None for r in reqs)
    assert results["cases"][0]["images"]["image_tokens"] is None


def test_bad_image_datasets_are_one_line_errors(sim, tmp_path):
    _llava(tmp_path)
    data = str(tmp_path / "llava.json")
    (tmp_path / "gone.json").write_text(json.dumps([{"image": "nowhere.png", "conversations": [
        {"from": "human", "value": "<image> hi"}]}]))  # fmt: skip
    for args, words in (
        (("--dataset", str(tmp_path / "gone.json")), "image not found: nowhere.png"),
        (("--dataset", data, "--pp", "128"), "holds images"),
        (("--dataset", data, "--endpoint", "completions"), "a dataset with images needs --endpoint"),
    ):
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "out"), *args)
        assert proc.returncode in (1, 2) and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_report_shows_image_tokens_beside_the_texts(sim, tmp_path):
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), *"--pp 64 --tg 4 -c 1 --runs 2 --images 3 --image-size 84x28".split()
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    truth = [t for t in sim.truth() if t.get("images")]
    assert {t["image_tokens"] for t in truth} == {3 * _tokens(84, 28)}
    row = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| pp64 tg4 | 3 |"))
    assert row.split("|")[4:6] == [f" {3 * _tokens(84, 28)} ", " 64 "]
    html = (out / "report.html").read_text()
    assert f"<td>{3 * _tokens(84, 28)}</td>" in html.replace(' style="text-align:right"', "")
    saved = json.loads((out / "results.json").read_text())
    for name in ("manifest.json", "requests.jsonl"):  # the bundle alone gives the same figures
        (tmp_path / "again").mkdir(exist_ok=True)
        (tmp_path / "again" / name).write_bytes((out / name).read_bytes())
    assert run_benchy_here("rebuild", str(tmp_path / "again")).returncode == 0
    rebuilt = json.loads((tmp_path / "again" / "results.json").read_text())
    assert rebuilt["cases"][0]["images"] == saved["cases"][0]["images"] and saved["cases"][0]["images"]["counted"] == 2
    assert rebuilt["setup"]["load"]["images"] == saved["setup"]["load"]["images"]


def _record(**fields) -> Tagged:
    planned = {"target_prompt_tokens": 64, "target_output_tokens": 4, "prompt_slack": 2}
    return Tagged(case="c", run=0, index=0, warmup=False, request_id="r", nonce=None, **{**planned, **fields})


def test_the_text_is_checked_only_where_the_server_told_the_images_apart():
    """With the server's own image count the text's length is checked (a text 20 tokens long
    withholds the prefill rate); without it the rest of usage is the images', and nothing is
    withheld for a length that cannot be told."""
    told = _record(images=1, server_image_tokens=16, prompt_tokens=64 + 16 + 20)
    assert isinstance(request_formulas.prefill_tps(told, None, 0.1), Unavailable)
    assert measure_images.image_tokens(told) == (16, "server")
    right = _record(images=1, server_image_tokens=16, prompt_tokens=64 + 16)
    assert request_formulas.prefill_tps(right, None, 0.1) == pytest.approx(80 / 0.1)
    untold = _record(images=1, prompt_tokens=64 + 36)
    assert request_formulas.prefill_tps(untold, None, 0.1) == pytest.approx(100 / 0.1)
    assert measure_images.image_tokens(untold) == (36, "usage_minus_text")
    assert measure_images.image_tokens(_record(images=1, prompt_tokens=50, target_prompt_tokens=0)) is None


def test_a_parquet_image_column_is_sent_as_it_is(start_sim, tmp_path):
    """A Hugging Face image column ({"bytes", "path"}) in Parquet: the bytes go as they are."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    sim = start_sim("--image-token-details", "--prefill-tps", "20000")
    pictures = [_png(70, 30), _png(30, 70)]
    table = pa.table(
        {
            "prompt": ["What is in the picture?", "Describe it."],
            "image": [{"bytes": p, "path": None} for p in pictures],
        }
    )
    pq.write_table(table, tmp_path / "vqa.parquet")
    results = run_json(sim, tmp_path, "--dataset", str(tmp_path / "vqa.parquet"), *"--tg 4 -c 1 --runs 2".split())
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    sent = sorted(truth[r["request_id"]]["images"][0]["sha256"] for r in _measured(results))
    assert sent == sorted(hashlib.sha256(p).hexdigest() for p in pictures)
    assert all(r["image_tokens"] == _tokens(70, 30) for r in _measured(results))


def test_the_image_probe_tells_no_hit_on_its_own():
    """An image cache saves the encoding, rarely the 2x a hit told by timing needs: the image
    probe judges the two TTFT samples only, never 'partial_hits' from a few fast repeats."""
    from benchy.probe.verdict import decide

    repeats, unique = [0.05, 0.052, 0.2, 0.21, 0.049], [0.2, 0.21, 0.19, 0.205, 0.2]
    assert decide(repeats, unique).verdict == "partial_hits"  # the prefix probe's reading
    assert decide(repeats, unique, by_hits=False).verdict != "partial_hits"
