"""The HTTP/SSE client: one request out, what arrived and when back. Knows nothing of statistics.

Where things are:
- settings.py: ClientSettings (what a run asks of its requests), --header parsing, the secrets
  the settings hold.
- errors.py: the error kinds a failed request is recorded with (one table for both transports);
  ServerError and TransientError for requests no measurement rides on.
- client.py: Client, a request's life: its payload, redirects, credentials, the one retry of a
  dropped kept-alive connection, the server's side pages, calibration and /tokenize requests.
- http1.py (the default, "lean") and aiohttp_pool.py (`--transport aiohttp`): the transports,
  behind one interface; connect.py what both use to reach a server (proxy routes, TLS, the
  plain-HTTP check of an https:// URL, HttpFailure).
- reader.py: the reader that turns a response's stamped reads into the request's Draft (draft.py),
  which makes its RequestRecord once, when the answer closes; sse.py
  splits the stream into events, harmony.py reads raw Harmony text, responses.py, messages.py
  and whole.py read the other APIs' events and a non-streamed answer.
- redact.py, extra_body.py: secrets kept out of everything benchy writes or prints.
"""
