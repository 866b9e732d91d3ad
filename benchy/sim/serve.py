"""The simulator as a process: listen, serve until SIGTERM or SIGINT, restart when --restart-after
asks (the port closed for --restart-down-s, then a fresh simulator on it), and fork --processes.
The HTTP face itself is sim/app.py."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import signal
import socket
import sys

from aiohttp import web

from benchy.sim import vocab
from benchy.sim.app import Simulator
from benchy.sim.config import SimConfig
from benchy.sim.engine import clock
from benchy.sim.lifecycle import fork_processes, stop_children


def warm_up() -> None:
    """Build the output vocabulary before listening, so the first request is not the slow one."""
    vocab.words(16, 0)


def listen_url(runner: web.AppRunner) -> str:
    host, port = runner.addresses[0][:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


async def serve(cfg: SimConfig, sock: socket.socket | None = None, process: int = 0) -> None:
    """Serves until SIGTERM or SIGINT; a restart (--restart-after) cuts every connection, leaves
    the port closed for --restart-down-s and serves again from a fresh simulator."""
    simulator = Simulator(cfg, process=process)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = await _listen(simulator, sock)
    if process == 0:  # only now: a caller may signal us as soon as it has read this line
        url = listen_url(runner)
        print(f"benchy sim listening on {url}", flush=True)
        print(f"benchy sim: measure it with: benchy run --base-url {url}/v1", file=sys.stderr, flush=True)
    try:
        while await _stop_or_restart(stop, simulator):
            port = runner.addresses[0][1]
            simulator.cut()
            await runner.cleanup()
            down_from = clock()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), cfg.restart_down_s)
            simulator.truth.note({"event": "restart", "from_s": down_from, "to_s": clock()})
            if stop.is_set():
                return
            fresh = dataclasses.replace(cfg, port=port, restart_after=0)  # once: back for good
            simulator = Simulator(fresh, simulator.truth, process, simulator.life + 1)
            simulator._ids = itertools.count(int(1e6))  # the ids of its second life stay unique
            runner = await _listen(simulator, None)
    finally:
        await runner.cleanup()
        simulator.close()


async def _listen(simulator: Simulator, sock: socket.socket | None) -> web.AppRunner:
    cfg = simulator.cfg
    # In-flight requests get a quarter second at shutdown: a stalled stream must not hold it.
    runner = web.AppRunner(simulator.app(), access_log=None, shutdown_timeout=0.25)
    await runner.setup()
    site = web.SockSite(runner, sock) if sock is not None else web.TCPSite(runner, cfg.host, cfg.port, backlog=2048)
    await site.start()
    return runner


async def _stop_or_restart(stop: asyncio.Event, simulator: Simulator) -> bool:
    """True once the simulator asks for a restart, False once asked to stop."""
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(simulator.lifecycle.restart.wait())}
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()
    return not stop.is_set()


def run(cfg: SimConfig) -> None:
    vocab.use(cfg.vocab)
    warm_up()
    if cfg.processes == 1:
        asyncio.run(serve(cfg))
        return
    first, children = fork_processes(cfg, lambda sock, index: asyncio.run(serve(cfg, sock, index)))
    try:
        asyncio.run(serve(cfg, first, 0))
    finally:
        stop_children(children)
