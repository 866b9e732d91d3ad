"""Server identity (benchy/server/identity.py): against the simulator over real HTTP in both flavours,
and from the answers real engines give (recorded shapes of vLLM, SGLang, Ollama, llama.cpp)."""

from __future__ import annotations

import asyncio

from benchy import __version__
from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.server.identity import (
    LLAMACPP,
    OLLAMA,
    SGLANG,
    SIM,
    VLLM,
    _Answer,
    banner,
    identify,
    read_identity,
    root_url,
)


def _identify(base_url: str, model: str | None = "benchy-sim"):
    async def go():
        async with Client(ClientSettings(base_url)) as client:
            return await identify(client, base_url, model)

    return asyncio.run(go())


def test_root_url_drops_only_the_trailing_v1():
    assert root_url("http://h:1/v1") == "http://h:1"
    assert root_url("http://h:1/v1/") == "http://h:1"
    assert root_url("http://h:1/openai") == "http://h:1/openai"


def test_sim_vllm_flavour_context_from_models_and_no_slots(start_sim):
    sim = start_sim("--context-length", "4096", "--max-running", "3", truth_log=False)
    ident = _identify(sim.base_url)
    assert ident.engine == SIM and ident.version == __version__
    assert ident.server_header == f"benchy-sim/{__version__}"
    assert (ident.context_length, ident.context_source) == (4096, "/v1/models max_model_len")
    assert ident.slots is None and "slots" in ident.unavailable  # vLLM-like: nobody says
    assert ident.answered["/props"] == 404


def test_sim_llamacpp_flavour_reads_props(start_sim):
    sim = start_sim("--flavor", "llamacpp", "--context-length", "3072", "--max-running", "2", truth_log=False)
    ident = _identify(sim.base_url)
    assert ident.context_length == 3072 and ident.context_source.startswith("/props")
    assert (ident.slots, ident.slots_source) == (2, "/props total_slots")
    assert ident.build == f"benchy-sim-{__version__}"
    assert ident.model_path == "/models/benchy-sim.gguf"
    assert "{% for m in messages %}" in ident.chat_template
    assert ident.context_train == 3072
    line = banner(ident, sim.base_url, "out/dir")
    assert "context 3072" in line and "2 slots" in line and "results → out/dir" in line


def test_unreachable_server_is_unknown_not_an_error():
    ident = _identify("http://127.0.0.1:9/v1")  # discard port: nothing listens
    assert ident.engine is None and ident.context_length is None
    assert set(ident.unavailable) >= {"engine", "version", "context_length", "slots"}
    assert set(ident.answered.values()) == {"connect"}  # the transport's failure kind, one word


def _answers(**bodies) -> dict:
    """Endpoint → answer; absent endpoints answer 404."""
    paths = ("/props", "/version", "/v1/models", "/get_server_info", "/api/version", "/api/show")
    server = bodies.pop("server", None)
    return {p: _Answer(200, bodies[p], server) if p in bodies else _Answer(404, None, server) for p in paths}


def test_vllm_answers():
    models = {"data": [{"id": "m", "owned_by": "vllm", "root": "/w/llama", "max_model_len": 8192}]}
    ident = read_identity(_answers(**{"/version": {"version": "0.11.0"}, "/v1/models": models}), "m")
    assert (ident.engine, ident.version, ident.context_length, ident.model_path) == (VLLM, "0.11.0", 8192, "/w/llama")
    assert "max_num_seqs" in ident.unavailable["slots"]


def test_llamacpp_answers_prefer_props_per_slot_context():
    props = {"build_info": "b6500-abc", "total_slots": 4, "default_generation_settings": {"n_ctx": 16384}}
    models = {"data": [{"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx": 16384, "n_ctx_train": 131072}}]}
    ident = read_identity(_answers(**{"/props": props, "/v1/models": models}, server="llama.cpp"), "m")
    assert (ident.engine, ident.build, ident.slots, ident.context_length) == (LLAMACPP, "b6500-abc", 4, 16384)
    assert ident.context_train == 131072 and ident.engine_version == "llama.cpp b6500-abc"


def test_sglang_answers():
    info = {"version": "0.5.2", "model_path": "Qwen/Qwen3-8B", "context_length": 40960, "max_running_requests": 48}
    models = {"data": [{"id": "m", "owned_by": "sglang", "max_model_len": 40960}]}
    ident = read_identity(_answers(**{"/get_server_info": info, "/v1/models": models}), "m")
    assert (ident.engine, ident.version, ident.slots) == (SGLANG, "0.5.2", 48)
    assert ident.context_source == "/get_server_info context_length"


def test_ollama_without_num_ctx_says_why_context_is_unknown():
    show = {"model_info": {"llama.context_length": 131072}, "parameters": "stop <|eot|>", "template": "{{ .Prompt }}"}
    answers = _answers(**{"/api/version": {"version": "0.6.2"}, "/api/show": show, "/v1/models": {"data": []}})
    ident = read_identity(answers, "llama3")
    assert (ident.engine, ident.version, ident.context_train) == (OLLAMA, "0.6.2", 131072)
    assert ident.context_length is None and "num_ctx" in ident.unavailable["context_length"]
    show["parameters"] = "num_ctx 8192\nstop x"
    assert read_identity(answers, "llama3").context_length == 8192


def test_server_header_is_the_last_resort():
    ident = read_identity(_answers(**{"/v1/models": {"data": [{"id": "m"}]}}, server="nginx/1.25"), "m")
    assert ident.engine is None and ident.engine_version == "nginx/1.25"
