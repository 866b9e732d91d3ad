"""Cache-aware workloads: traffic that a prefix cache is meant to help, measured honestly.

A plain sweep (loadgen.py) makes sure no cache serves its requests. Real traffic is the other
case, and these workloads measure what the server's prefix cache is worth on it:

  multi_turn     U conversations of T turns; each turn resends the whole history (the server's
                 own answers as it returned them) plus a new user message (multi_turn.py)
  shared_prefix  G groups, each with its own shared prefix of P tokens and a unique suffix of
                 S tokens; a sweep over P/(P+S) beside the same lengths with nothing shared
                 (shared_prefix.py)
  trace          replay of a request trace (Mooncake JSONL with block hash ids, or plain JSONL
                 of lengths) at its own times (trace.py)

Every workload keeps the nonce discipline of the sweep: what should not be shared is unique
per request and per invocation (a nonce, or block ids salted per invocation), and what should
be shared is byte-identical. Each request's record says how many prompt tokens an ideal cache
would serve it (`expected_cached_tokens`) and how many at its end no cache can hold
(`unique_tokens`), so reported reuse can be set against both: less is eviction, more is leakage.

The specs (spec.py) are plain data for scenario.py; the runners build prompts through
prompts.py and send through the same client and records as every other case.
"""

KINDS = ("sweep", "multi_turn", "shared_prefix", "trace")
