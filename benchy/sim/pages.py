"""The simulator's pages besides generation: health, models, props, /metrics, DCGM, /tokenize
and the cache resets (vLLM's /reset_prefix_cache, llama.cpp's slot erase)."""

from __future__ import annotations

from aiohttp import web

from benchy import __version__
from benchy.sim import vocab
from benchy.sim.config import BLOCK_SIZE, SimConfig
from benchy.sim.engine import CHAT_TEMPLATE, Engine, Trace, TruthLog, clock
from benchy.sim.gpu import SimGpus
from benchy.sim.metrics import CONTENT_TYPE as METRICS_TYPE
from benchy.sim.metrics import SimMetrics
from benchy.sim.request import JSON_TYPE, ApiError, check_model, error_body, prompt_text, read_json
from benchy.sim.router import Router


class Pages:
    """The informational and admin endpoints over the simulator's engines and accounts."""

    def __init__(
        self,
        cfg: SimConfig,
        engines: list[Engine],
        router: Router,
        truth: TruthLog,
        metrics: SimMetrics,
        replica_metrics: list[SimMetrics],
        gpus: SimGpus | None,
    ):
        self.cfg, self.engines, self.router, self.truth = cfg, engines, router, truth
        self.metrics, self.replica_metrics, self.gpus = metrics, replica_metrics, gpus
        self.cache_resets = 0

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        if self.cfg.metrics:
            app.router.add_get("/metrics", self.prometheus)
        if self.cfg.router_pages:
            app.router.add_get("/list_workers", self.list_workers)
            if self.cfg.metrics:
                app.router.add_get("/replicas/{n}/metrics", self.replica_prometheus)
        if self.cfg.flavor == "llamacpp":
            app.router.add_get("/props", self.props)
            app.router.add_post("/slots/{slot}", self.slot_action)
        elif self.cfg.cache_reset:
            app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        if self.gpus is not None:
            app.router.add_get("/dcgm/metrics", self.dcgm)
        if self.cfg.tokenize:
            app.router.add_post("/tokenize", self.tokenize)

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": f"benchy-sim {__version__}"})

    async def models(self, request: web.Request) -> web.Response:
        model: dict[str, object] = {"id": self.cfg.model, "object": "model", "owned_by": "benchy-sim"}
        if self.cfg.flavor == "llamacpp":  # llama.cpp: per-slot context under meta
            model["meta"] = {"n_ctx": self.cfg.context_length, "n_ctx_train": self.cfg.context_length}
        else:
            model["max_model_len"] = self.cfg.context_length
        return web.json_response({"object": "list", "data": [model]})

    async def props(self, request: web.Request) -> web.Response:
        """llama.cpp's /props: the facts benchy reads from a llama-server."""
        return web.json_response(
            {
                "default_generation_settings": {"n_ctx": self.cfg.context_length},
                "total_slots": self.cfg.max_running,
                "model_alias": self.cfg.model,
                "model_path": f"/models/{self.cfg.model}.gguf",
                "chat_template": CHAT_TEMPLATE,
                "build_info": f"benchy-sim-{__version__}",
            }
        )

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """vLLM's POST /reset_prefix_cache: empties the cache of the replica it is routed to
        (behind a router, one of them), and leaves a truth record of the reset."""
        return self._reset(request, "reset_prefix_cache", web.Response(text=""))

    async def slot_action(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /slots/{id}?action=erase: the sim's slots share one cache, so
        erasing any slot empties it."""
        if not self.cfg.cache_reset:
            message = "This server does not support slots action. Start it with `--slot-save-path`"
            return web.Response(status=501, body=error_body(501, message), content_type=JSON_TYPE)
        if request.query.get("action") != "erase":
            return web.Response(
                status=400, body=error_body(400, "only action=erase is simulated"), content_type=JSON_TYPE
            )
        slot = request.match_info["slot"]
        if not slot.isdigit() or int(slot) >= self.cfg.max_running:
            return web.Response(status=400, body=error_body(400, f"invalid slot id {slot}"), content_type=JSON_TYPE)
        return self._reset(request, "slot_erase", None, int(slot))

    def _reset(self, request: web.Request, endpoint: str, answer: web.Response | None, slot: int = 0) -> web.Response:
        replica = self.router.route()
        held = self.engines[replica].reset_cache()
        self.cache_resets += 1
        trace = Trace(id=f"reset-{self.cache_resets:06d}", request_id=None, endpoint=endpoint, arrival_s=clock())
        trace.replica, trace.status, trace.cache_used_blocks = replica, 200, 0
        trace.cache_evicted_blocks = held
        self.truth.write(trace)  # not a generation: /metrics does not count it
        return answer or web.json_response({"id_slot": slot, "n_erased": held * BLOCK_SIZE})

    async def list_workers(self, request: web.Request) -> web.Response:
        """--router-pages: the replicas by URL, as vllm-router and sglang-router list them."""
        root = f"{request.url.scheme}://{request.host}"
        return web.json_response({"urls": [f"{root}/replicas/{i}" for i in range(self.cfg.replicas)]})

    async def replica_prometheus(self, request: web.Request) -> web.Response:
        n = request.match_info["n"]
        if not n.isdigit() or int(n) >= self.cfg.replicas:
            return web.Response(status=404, body=error_body(404, f"no replica {n}"), content_type=JSON_TYPE)
        return self._exposition(int(n))

    async def prometheus(self, request: web.Request) -> web.Response:
        if self.cfg.router_pages:  # the router passes /metrics to one replica
            return self._exposition(0)
        engines = self.engines
        caches = [e.cache for e in engines if e.cache is not None]
        kv_usage = sum(len(c) / c.capacity for c in caches) / len(caches) if caches else 0.0
        running, waiting = sum(e.slots.running for e in engines), sum(e.slots.waiting for e in engines)
        body = self.metrics.exposition(running, waiting, kv_usage)
        return web.Response(body=body, headers={"Content-Type": METRICS_TYPE})

    def _exposition(self, replica: int) -> web.Response:
        engine = self.engines[replica]
        kv_usage = len(engine.cache) / engine.cache.capacity if engine.cache is not None else 0.0
        body = self.replica_metrics[replica].exposition(engine.slots.running, engine.slots.waiting, kv_usage)
        return web.Response(body=body, headers={"Content-Type": METRICS_TYPE})

    async def dcgm(self, request: web.Request) -> web.Response:
        """dcgm-exporter's text for the simulated GPUs (sim/gpu.py)."""
        assert self.gpus is not None
        text = self.gpus.scrape(clock())
        if text is None:
            return web.Response(status=500, text="simulated exporter failure\n")
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        """The sim's own vocabulary (sim/vocab.py), never benchy's: llama.cpp's {content} →
        {tokens}, vLLM's {model, prompt | messages} → {count, tokens}. --note-tokenize notes each
        call in the truth log (when it came, how many tokens): tests see it was off the hot path."""
        try:
            body = await read_json(request)
            if "content" in body:  # llama.cpp style
                ids = vocab.encode(str(body["content"]))
                self._note_tokenize(len(ids))
                return web.json_response({"tokens": ids})
            check_model(self.cfg, body)
            endpoint = "chat" if "messages" in body else "completions"
            ids = vocab.encode(prompt_text(body, endpoint))
        except ApiError as exc:
            return web.Response(status=exc.status, body=error_body(exc.status, exc.message), content_type=JSON_TYPE)
        self._note_tokenize(len(ids))
        return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": self.cfg.context_length})

    def _note_tokenize(self, tokens: int) -> None:
        if self.cfg.note_tokenize:
            self.truth.note({"request_id": None, "tokenize": {"t_s": clock(), "tokens": tokens}})
