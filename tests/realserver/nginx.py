"""A real nginx (the Debian package) in front of real servers, for tests: started on 127.0.0.1
with a config generated in a temporary folder, stopped by its own PID.

Why: a reverse proxy is where real deployments change a stream on its way to the client —
`proxy_buffering on` holds SSE bytes until a buffer fills or the response ends, `gzip on` for
`text/event-stream` compresses a stream into a few deflate blocks. The simulator imitates both;
this puts the real one between benchy and llama.cpp's server. Nothing touches root paths: the
pid file, logs and every temp path nginx writes are under the temporary folder, so it runs as
any user. `nginx_proxy(["127.0.0.1:8080", ...])` round-robins over the given upstreams.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
# The echo module (Debian's libnginx-mod-http-echo): echo_sleep holds a request in nginx itself
ECHO_MODULE_CANDIDATES = (
    "/usr/lib/nginx/modules/ngx_http_echo_module.so",
    "/usr/share/nginx/modules/ngx_http_echo_module.so",
    "/usr/local/nginx/modules/ngx_http_echo_module.so",
)
START_TIMEOUT_S = 15.0


class NginxError(RuntimeError):
    """nginx did not start (the message has its error log's tail)."""


def nginx_binary() -> str | None:
    """The nginx executable, or None when it is not installed."""
    found = shutil.which("nginx")
    if found:
        return found
    return next((p for p in NGINX_CANDIDATES if os.access(p, os.X_OK)), None)


def missing_nginx() -> str | None:
    """Why nginx cannot be used here, or None."""
    if nginx_binary() is None:
        return "nginx is not installed (apt-get install nginx-light, or nginx; .ci/run does this)"
    return None


def echo_module() -> str | None:
    """The echo module's shared object, or None when it is not installed."""
    return next((p for p in ECHO_MODULE_CANDIDATES if os.access(p, os.R_OK)), None)


def missing_echo_module() -> str | None:
    """Why nginx with the echo module cannot be used here, or None."""
    if echo_module() is None:
        return "nginx's echo module is not installed (apt-get install libnginx-mod-http-echo; .ci/run does this)"
    return missing_nginx()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_port(upstream: str) -> str:
    """'http://127.0.0.1:8080/v1' or '127.0.0.1:8080' → '127.0.0.1:8080'."""
    return upstream.split("://", 1)[-1].split("/", 1)[0]


def render_config(
    folder: Path, port: int, upstreams: list[str], directives: str = "", main: str = "", server: str = ""
) -> str:
    """The whole nginx.conf: one worker, every path under `folder`, a round-robin upstream over
    `upstreams` (host:port; no upstream keep-alive: llama.cpp closes streamed connections, and a
    POST on a reused, closed one would fail), and `directives` inside the proxying location
    (e.g. "proxy_buffering on;" or "gzip on; gzip_types text/event-stream;"); `main` in the main
    context (load_module), `server` in the server block (more locations). The access log's
    `timing` format holds nginx's own request time and its upstream's."""
    servers = "\n".join(f"        server {host_port(u)};" for u in upstreams)
    temp = {name: folder / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    return f"""
daemon off;
master_process on;
worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} info;
{main}
events {{ worker_connections 256; }}
http {{
    log_format timing '$request_method $uri $status $request_time $upstream_response_time';
    access_log {folder / "access.log"} timing;
    client_body_temp_path {temp["client_body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    upstream backends {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 64m;
        {server}
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 300s;
            {directives}
        }}
    }}
}}
"""


def _wait_until_up(proc: subprocess.Popen, port: int, folder: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise NginxError(f"nginx exited with {proc.returncode}: {_tail(folder)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise NginxError(f"nginx did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s: {_tail(folder)}")


def _tail(folder: Path, n: int = 20) -> str:
    try:
        return "\n".join((folder / "error.log").read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no error log)"


def _stop(proc: subprocess.Popen) -> None:
    """SIGQUIT (graceful) to this master's PID, then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def nginx_proxy(
    upstreams: list[str], directives: str = "", main: str = "", server: str = "", logs: Path | None = None
) -> Iterator[str]:
    """nginx on a free 127.0.0.1 port, proxying to `upstreams` (host:port, round-robin) with
    `directives` in its location (upstreams may be given as URLs: their host:port is used); yields the proxy's base URL (http://127.0.0.1:PORT, no /v1).
    `main` and `server`: see render_config. `logs`: a folder that receives access.log and
    error.log when nginx stops. Stopped on exit, also when the body raises. NginxError when it
    does not start."""
    binary = nginx_binary()
    if binary is None:
        pytest.skip(missing_nginx() or "nginx is not installed")
    if not upstreams:
        raise ValueError("nginx_proxy needs at least one upstream host:port")
    with tempfile.TemporaryDirectory(prefix="benchy-nginx-") as tmp:
        folder = Path(tmp)
        port = _free_port()
        conf = folder / "nginx.conf"
        conf.write_text(render_config(folder, port, upstreams, directives, main, server))
        # -p: the prefix for any relative path; -e: the startup error log, before the config's applies.
        cmd = [binary, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf)]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_until_up(proc, port, folder)
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop(proc)
            if proc.stderr:
                proc.stderr.close()
            if logs is not None:
                for name in ("access.log", "error.log"):
                    if (folder / name).exists():
                        shutil.copyfile(folder / name, logs / name)
