"""nginx (the Debian package) as a reverse proxy over several real servers, for the tests of a
router without cache affinity: `nginx_proxy(upstreams, directives)` writes a config in a temp
folder (pid, logs and temp paths all there), listens on 127.0.0.1 only, and yields the proxy's
root URL (`http://127.0.0.1:PORT`; OpenAI paths under `/v1` as on the servers). Round robin by
default; `directives` go inside the upstream block (e.g. "random;"). Streams are not buffered
(proxy_buffering off), as a deployment in front of an LLM server would configure. A test that
uses it is skipped when /usr/sbin/nginx is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

NGINX = "/usr/sbin/nginx"
START_TIMEOUT_S = 10.0

CONFIG = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 64m;
    client_body_buffer_size 4m;
    upstream backends {{
        {directives}
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""


def _host_port(upstream: str) -> str:
    """'http://127.0.0.1:8080/v1' or '127.0.0.1:8080' → '127.0.0.1:8080'."""
    rest = upstream.split("://", 1)[-1]
    return rest.split("/", 1)[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0):
            return True
    except urllib.error.HTTPError:
        return True  # nginx answered (the upstream's status is its own)
    except OSError:
        return False


@contextlib.contextmanager
def nginx_proxy(upstreams: list[str], directives: str = "") -> Iterator[str]:
    if not os.path.exists(NGINX):
        pytest.skip(f"{NGINX} is missing (apt-get install nginx)")
    tmp = Path(tempfile.mkdtemp(prefix="benchy-nginx-"))
    os.chmod(tmp, 0o755)  # a worker that dropped root's rights must still reach its temp paths
    port = _free_port()
    servers = "\n".join(f"        server {_host_port(u)};" for u in upstreams)
    (tmp / "nginx.conf").write_text(CONFIG.format(tmp=tmp, port=port, directives=directives, servers=servers))
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp / sub).mkdir(mode=0o777)
        os.chmod(tmp / sub, 0o777)
    proc = subprocess.Popen(
        [NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(url + "/health"):
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                log = (tmp / "error.log").read_text(errors="replace") if (tmp / "error.log").exists() else ""
                raise RuntimeError(f"nginx did not start on {url}: {err}{log}"[-2000:])
            time.sleep(0.05)
        yield url
    finally:
        if proc.poll() is None:
            proc.terminate()  # our child, by its PID: nginx's master, which stops its worker
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stderr:
            proc.stderr.close()
        shutil.rmtree(tmp, ignore_errors=True)
