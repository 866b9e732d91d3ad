"""Secrets and safety: the API key reaches the server in the Authorization header and nowhere
else; TLS is verified unless --insecure; the simulator listens on 127.0.0.1 by default."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import pty
import shutil
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from aiohttp import web

from benchy import run as run_mod
from benchy.cli import main
from benchy.client.client import Client
from benchy.client.errors import ServerError
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord
from benchy.workloads.case import Case
from tests.conftest import run_benchy, sim_env, start_benchy
from tests.netservers import Relay

KEY = "sk-SENTINEL-4f9c2a7e1b93d"
USER = "benchyuser"
WORD = "sunshine"  # a password, or a key, that is a common word


def forms_of_secret(user: str = USER, key: str = KEY) -> list[bytes]:
    """Every way the key could leak: as is, and inside a Basic or Bearer header."""
    return [key.encode(), base64.b64encode(f"{user}:{key}".encode()), base64.b64encode(key.encode())]


def assert_no_secret(where: str, data: bytes, user: str = USER, key: str = KEY) -> None:
    for form in forms_of_secret(user, key):
        assert form not in data, f"the key leaked into {where}"


def run_on_a_terminal(cmd: list[str], env: dict, stdout_path: Path) -> tuple[int, bytes]:
    """Runs benchy with stderr on a pseudo-terminal, so the progress display is really drawn."""
    master, slave = pty.openpty()
    with open(stdout_path, "wb") as stdout:
        proc = start_benchy(*cmd, stdout=stdout, stderr=slave, env=env)
    os.close(slave)
    terminal = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        terminal += data
    os.close(master)
    return proc.wait(timeout=120), bytes(terminal)


@pytest.mark.parametrize("how", ["flag", "env", "userinfo", "header", "word_userinfo", "word_env"])
def test_key_goes_only_to_the_authorization_header(start_sim, tmp_path, how):
    """…or, with --header, only to the headers named (Authorization replaces the key's). A
    one-letter user and a password or key that is a common word vanish the same way, and
    mask nothing else: no message holds ***, for the simulator echoes no credential."""
    sim = start_sim(
        "--decode-tps",
        "4000",
        "--prefill-tps",
        "200000",
        "--seed",
        "4",
        "--fault",
        "http500:0.15",
        "--fault",
        "not_sse:0.1",
        "--fault",
        "cut_stream:0.1",
    )
    env = sim_env()
    env.pop("OPENAI_API_KEY", None)
    base_url, expected_header = sim.base_url, f"Bearer {KEY}"
    user, key = ("u", WORD) if how.startswith("word") else (USER, KEY)
    args = []
    if how == "word_env":
        env["OPENAI_API_KEY"], expected_header = WORD, f"Bearer {WORD}"
    elif how == "word_userinfo":
        base_url = sim.base_url.replace("http://", f"http://{user}:{key}@")
        expected_header = "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()
    elif how == "flag":
        args = ["--api-key", KEY]
    elif how == "env":
        env["OPENAI_API_KEY"] = KEY
    elif how == "userinfo":
        base_url = sim.base_url.replace("http://", f"http://{USER}:{KEY}@")
        expected_header = "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()
    else:
        env["OPENAI_API_KEY"] = "sk-REPLACED-BY-THE-HEADER"
        args = ["-H", f"api-key: {KEY}", "--header", f"Authorization: Bearer {KEY}"]
    out = tmp_path / "out"
    with Relay(int(sim.url.rsplit(":", 1)[1])) as relay:  # to see what went over the wire
        relayed = base_url.replace(sim.url.split("//")[1], f"127.0.0.1:{relay.port}")
        cmd = ["run", "--base-url", relayed, *args, *"--pp 64 --tg 8 -c 2 --runs 6".split(), "-o", str(out)]
        code, terminal = run_on_a_terminal(cmd, env, tmp_path / "stdout")
    assert code == 0, terminal.decode(errors="replace")
    if how == "header":
        assert {r.headers.get("api-key") for r in relay.requests} == {KEY}
    assert (
        b"\r" in terminal and b"/12" in terminal
    )  # the progress display was drawn: the 12 measured (not the alone or warmup)

    results = json.loads((out / "results.json").read_text())
    assert results["cases"][0]["errors"], "no error message was exercised"
    command_line = results["setup"]["command_line"]
    if how == "flag":
        assert "--api-key '***'" in command_line or "--api-key ***" in command_line
    if how == "userinfo":
        assert "***@" in command_line
    if how == "header":
        assert "-H 'api-key: ***'" in command_line and "--header 'Authorization: ***'" in command_line

    outputs = {
        "stdout": (tmp_path / "stdout").read_bytes(),
        "terminal (stderr)": terminal,
        "truth log": sim.truth_path.read_bytes(),
        "simulator stderr": sim.stderr().encode(),
    }
    outputs.update({str(p): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert {"results.json", "requests.jsonl", "manifest.json", "report.md"} <= {Path(p).name for p in outputs}
    for where, data in outputs.items():
        assert_no_secret(where, data, user, key)
    if how.startswith("word"):
        messages = [json.loads(line).get("error") or "" for line in (out / "requests.jsonl").read_text().splitlines()]
        assert any(messages), "no error message was exercised"
        assert not [m for m in messages if "***" in m]
        assert "***" not in (tmp_path / "stdout").read_text() + terminal.decode(errors="replace")

    generation = [t for t in sim.truth() if t["request_id"] is not None or t["stream"] is False]
    assert generation and all(
        t["authorization_sha256"] == hashlib.sha256(expected_header.encode()).hexdigest() for t in generation
    )


def test_without_a_key_no_authorization_header_is_sent(start_sim):
    sim = start_sim("--instant")

    async def one() -> None:
        async with Client(ClientSettings(base_url=sim.base_url, model="benchy-sim")) as client:
            rec = RequestRecord(
                case="c",
                run=0,
                index=0,
                warmup=False,
                request_id="nokey",
                nonce=None,
                target_prompt_tokens=1,
                target_output_tokens=4,
            )
            await client.stream(rec, "hi", 4, "chat")

    asyncio.run(one())
    assert [t["authorization_sha256"] for t in sim.truth(expect=1)] == [None]


@pytest.mark.parametrize(
    "argv",
    [
        ["--base-url", f"http://{USER}:{KEY}@127.0.0.1:9/v1", "--api-key", KEY],  # nothing listens there
        ["--base-url", f"{USER}:{KEY}@127.0.0.1:9/v1"],  # no scheme
        ["--base-url", f"http://{USER}:{KEY}@127.0.0.1:99999/v1"],  # bad port
        ["--api-key", KEY, "--base-url", "http://127.0.0.1:9/v1", "--runs", "0"],
        ["-H", f"api-key: {KEY}", "--base-url", "http://127.0.0.1:9/v1"],
        ["-H", f"api-key={KEY}", "--base-url", "http://127.0.0.1:9/v1"],  # not 'Name: value'
        ["--header", f"Content-Length: {KEY}"],  # a header benchy sets itself
        ["--base-url", f"http://127.0.0.1:9/v1?api-version=1&api-key={KEY}"],
    ],
)
def test_error_messages_never_carry_the_key(argv):
    proc = start_benchy("run", "--pp", "64", *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout, proc.stderr = proc.communicate(timeout=60)
    assert proc.returncode in (1, 2)
    assert len(proc.stderr.strip().splitlines()) == 1 and b"Traceback" not in proc.stderr
    assert_no_secret("stderr", proc.stderr + proc.stdout)


@pytest.mark.parametrize(
    "credentials",
    [
        ["--base-url", f"http://u:{WORD}@127.0.0.1:9/v1"],  # a one-letter user
        ["--base-url", "http://127.0.0.1:9/v1", "-H", "X-Priority: 1"],  # a header value of one digit
        ["--base-url", "http://127.0.0.1:9/v1", "--api-key", "e"],
    ],
)
def test_a_short_credential_masks_no_other_word(credentials):
    """The error about an unreachable server reads the same with a credential of a letter or a
    digit as without one: only a secret's place, or the secret as a whole word, is masked."""
    env = sim_env()
    env.pop("OPENAI_API_KEY", None)
    plain = run_benchy("run", "--pp", "64", "--base-url", "http://127.0.0.1:9/v1", env=env, timeout=60)
    given = run_benchy("run", "--pp", "64", *credentials, env=env, timeout=60)
    assert plain.returncode == 1 and len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    assert given.returncode == plain.returncode and given.stderr == plain.stderr
    assert "***" not in given.stderr


def echoed(settings: ClientSettings) -> RequestRecord:
    """One request to an EchoServer, its record as the client filled it."""

    async def one() -> RequestRecord:
        async with Client(settings) as client:
            rec = RequestRecord(
                case="c",
                run=0,
                index=0,
                warmup=False,
                request_id="echo",
                nonce=None,
                target_prompt_tokens=1,
                target_output_tokens=4,
            )
            return await client.stream(rec, "hi", 4, "chat")

    return asyncio.run(one())


class EchoServer:
    """A server that echoes the Authorization header into its error bodies, as some proxies
    do: whatever benchy keeps of those bodies must have the key scrubbed out."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "echo"}]})

    async def echo(self, request: web.Request) -> web.Response:
        return web.Response(
            status=401 if request.headers.get("X-Request-Id") is None else 500,
            text=f"bad credentials: {request.headers.get('Authorization')} {request.headers.get('api-key')}",
        )

    def __enter__(self) -> EchoServer:
        threading.Thread(target=self._serve, daemon=True).start()
        assert self.ready.wait(10)
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.echo)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self.ready.set()
        self.loop.run_forever()

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_a_key_echoed_by_the_server_is_scrubbed_from_records_and_errors(transport):
    with EchoServer() as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        headers = (("api-key", KEY),)

        rec = echoed(ClientSettings(base_url=base, api_key=KEY, model="echo", headers=headers, transport=transport))
        assert rec.error_kind == "http_500" and "bad credentials: Bearer *** ***" in rec.error
        settings = run_mod.RunSettings(
            client=ClientSettings(base_url=base, api_key=KEY, headers=headers, transport=transport),
            cases=[Case(pp=64, tg=4)],
            runs=1,
            warmup=0,
            progress=False,
        )
        with pytest.raises(ServerError) as err:  # calibration gets the 401: the run cannot start
            run_mod.execute(settings).to_dict()
    assert "HTTP 401" in str(err.value) and "Bearer ***" in str(err.value)
    assert_no_secret("the error", str(err.value).encode() + json.dumps(rec.to_dict()).encode())


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_url_credentials_echoed_by_the_server_are_scrubbed(transport):
    """A one-letter user and a common-word password go as a Basic token: a server that echoes
    its Authorization header echoes that token, and it is scrubbed like the password itself."""
    with EchoServer() as server:
        settings = ClientSettings(
            base_url=f"http://u:{WORD}@127.0.0.1:{server.port}/v1", model="echo", transport=transport
        )
        rec = echoed(settings)
    assert rec.error_kind == "http_500" and "bad credentials: Basic *** None" in rec.error
    assert_no_secret("the error", json.dumps(rec.to_dict()).encode(), "u", WORD)


# ---- TLS ---------------------------------------------------------------------------------


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def tls_server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server's TLS end with the self-signed certificate (netservers.Relay takes it)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def test_tls_is_verified_unless_insecure(start_sim, tmp_path, capsys):
    cert, key = self_signed(tmp_path)
    sim = start_sim("--instant")
    with Relay(int(sim.url.rsplit(":", 1)[1]), tls=tls_server_context(cert, key)) as proxy:
        argv = [
            "run",
            "--base-url",
            f"https://127.0.0.1:{proxy.port}/v1",
            "--pp",
            "64",
            "--tg",
            "4",
            "--runs",
            "1",
            "--warmup",
            "0",
            "-q",
        ]

        def run(*extra: str) -> tuple[int, str]:
            with pytest.raises(SystemExit) as done:
                main(argv + list(extra))
            return done.value.code, capsys.readouterr().err

        code, err = run()
        [line] = err.strip().splitlines()
        assert code == 1 and "certificate" in line and "--insecure" in line
        assert run("--insecure")[0] == 0
        # verification is real: once the certificate is trusted, the same server passes
        trusted = run_benchy(*argv, env={**sim_env(), "SSL_CERT_FILE": str(cert)}, timeout=120)
        assert trusted.returncode == 0, trusted.stderr


def test_sim_listens_on_loopback_by_default(start_sim):
    assert start_sim("--instant").url.startswith("http://127.0.0.1:")


# ---- redact.py: what the saved command line and URLs keep -------------------------------------


@pytest.mark.parametrize(
    "argv, kept, hidden",
    [
        (["-H", f"api-key: {KEY}"], "-H 'api-key: ***'", KEY),
        ([f"--header=X-Token: Bearer {KEY}"], "'--header=X-Token: ***'", KEY),
        ([f"-HX-Token: {KEY}"], "'-HX-Token: ***'", KEY),
        (["--api-key", KEY], "--api-key '***'", KEY),
        ([f"--api-key={KEY}"], "--api-key=***", KEY),
        (["--base-url", f"https://{USER}:{KEY}@h/v1?api-version=2024-02-01&sig={KEY}"], "api-version=2024-02-01", KEY),
    ],
)
def test_the_saved_command_line_keeps_header_names_and_drops_every_secret(argv, kept, hidden):
    from benchy.client.redact import redacted_command_line

    line = redacted_command_line(["run", *argv])
    assert kept in line and hidden not in line


def test_a_message_is_scrubbed_by_place_then_by_whole_word():
    """A URL's credentials whatever their length; a common-word password as a word, never
    inside another; a long key anywhere; a one-letter user nowhere but its place."""
    from benchy.client.redact import scrub, scrub_list

    secrets = scrub_list(["u", WORD, KEY])
    text = f"GET http://u:{WORD}@h/v1?token=t failed: {WORD}s refused; echo {KEY}x; bad password {WORD}."
    assert (
        scrub(text, secrets) == "GET http://***@h/v1?token=*** failed: sunshines refused; echo ***x; bad password ***."
    )


def test_urls_keep_their_query_but_not_its_secrets():
    from benchy.client.redact import redact_url, url_secrets

    url = f"https://{USER}:{KEY}@x.openai.azure.com/openai/deployments/d?api-version=2024-02-01&api-key={KEY}"
    assert redact_url(url) == "https://x.openai.azure.com/openai/deployments/d?api-version=2024-02-01&api-key=***"
    assert set(url_secrets(url)) == {USER, KEY}
