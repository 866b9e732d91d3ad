"""Run llama.cpp's native HTTP server (via xllamacpp) in this process until SIGTERM/SIGINT.

    python tests/realserver/serve.py --model X.gguf --port 0 --parallel 4 --threads 1

Prints exactly one line to stdout, ``listening on http://127.0.0.1:PORT``, once the model is
loaded and the socket is bound, then serves until SIGTERM/SIGINT (or until its parent dies).
llama.cpp's own log goes to stderr.

``--port 0`` is passed straight to llama.cpp, which binds an ephemeral port; the real port is
read back from ``Server.listening_address`` - no pick-then-bind race.

Endpoints (llama.cpp server): /health, /v1/models, /v1/chat/completions, /v1/completions,
/tokenize, /detokenize, /apply-template, /props, /slots, /metrics (with --metrics, on here by
default).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="path of the .gguf model")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = let the OS pick (default)")
    p.add_argument("--parallel", type=int, default=4, help="server slots (n_parallel)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for decode and prefill")
    p.add_argument(
        "--threads-http",
        type=int,
        default=-1,
        help="HTTP worker threads; each open request holds one "
        "(-1 = llama.cpp default: max(parallel+2, hardware threads - 1))",
    )
    p.add_argument(
        "--ctx-per-slot", type=int, default=3072, help="context per slot; n_ctx = parallel * this (default 3072)"
    )
    p.add_argument("--ctx-size", type=int, default=None, help="total n_ctx (overrides --ctx-per-slot)")
    p.add_argument(
        "--cache-ram",
        type=int,
        default=None,
        metavar="MIB",
        help="host-RAM prompt cache limit in MiB (cache_ram_mib): 0 = off, -1 = no limit; default: llama.cpp's (8192)",
    )
    p.add_argument(
        "--no-cache-prompt",
        action="store_true",
        help="default cache_prompt=false for requests (slot prefix reuse off unless a request sends cache_prompt=true)",
    )
    p.add_argument("--alias", default="benchy-tiny", help="model id served in /v1/models")
    p.add_argument(
        "--n-predict", type=int, default=-1, help="server-wide cap on generated tokens per request (-1 = none)"
    )
    p.add_argument(
        "--kv-unified",
        action="store_true",
        help="one KV buffer shared by all slots (kv_unified) instead of n_ctx/parallel each",
    )
    p.add_argument("--no-metrics", action="store_true", help="disable /metrics")
    p.add_argument("--embedding", action="store_true", help="embedding mode: serve /v1/embeddings (pooling)")
    p.add_argument("--reranking", action="store_true", help="rank pooling: serve /v1/rerank (a model with a rank head)")
    p.add_argument(
        "--chat-template-file",
        default=None,
        help="a Jinja chat template to use instead of the model's (tools_template.jinja: one with tool calls)",
    )
    p.add_argument("--mmproj", default=None, help="a multimodal projector GGUF (tiny_mmproj.py): images through mtmd")
    p.add_argument(
        "--verbosity", type=int, default=None, help="llama.cpp log verbosity (default 3 = info; 1 = errors+warnings)"
    )
    return p


def make_params(args: argparse.Namespace):
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    p.n_parallel = args.parallel
    p.n_ctx = args.ctx_size if args.ctx_size else args.parallel * args.ctx_per_slot
    p.cpuparams.n_threads = args.threads  # decode
    p.cpuparams_batch.n_threads = args.threads  # prompt processing (prefill)
    p.n_threads_http = args.threads_http
    if args.cache_ram is not None:
        p.cache_ram_mib = args.cache_ram
    p.cache_prompt = not args.no_cache_prompt
    p.kv_unified = args.kv_unified
    p.endpoint_metrics = not args.no_metrics
    p.endpoint_slots = True
    p.endpoint_props = True
    p.n_predict = args.n_predict
    if args.embedding:  # mean pooling: llama-server's OpenAI route refuses the model's default, none
        p.embedding = True
        p.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        p.n_batch = p.n_ubatch = args.ctx_per_slot  # an input is embedded in one physical batch
    if args.reranking:  # as llama-server's --reranking: embedding on, rank pooling (the model's score head)
        p.embedding = True
        p.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_RANK
        p.n_batch = p.n_ubatch = args.ctx_per_slot
    if args.alias:
        p.model_alias = {args.alias}
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            p.chat_template = f.read()
    if args.mmproj:
        p.mmproj.path = args.mmproj
        p.mmproj_use_gpu = False
    if args.verbosity is not None:
        p.verbosity = args.verbosity
    p.ui = False
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not os.path.exists(args.model):
        print(f"serve.py: model not found: {args.model}", file=sys.stderr)
        return 2
    import xllamacpp as xlc

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    parent = os.getppid()
    try:
        server = xlc.Server(make_params(args))  # loads the model, binds, serves in threads
    except RuntimeError as e:
        print(f"serve.py: server failed to start: {e}", file=sys.stderr)
        return 1
    print(f"listening on {server.listening_address}", flush=True)

    # Serve until signalled, or until the parent goes away (reparented), so an aborted test
    # run never leaves a server behind.
    while not stop.wait(0.5):
        if os.getppid() != parent:
            break
    del server  # ~Server: stops the HTTP listener and the main loop, joins threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
