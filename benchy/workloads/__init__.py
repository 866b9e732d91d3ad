"""The plan stage: what to measure, before anything is sent — cases from flags and scenario
files (case.py, selection.py, scenario.py), and the cache-aware workloads (spec.py, cases.py, trace.py).

Cache-aware workloads are traffic that a prefix cache is meant to help, measured honestly.
A plain sweep (load/generator.py) makes sure no cache serves its requests. Real traffic is the other
case, and these workloads measure what the server's prefix cache is worth on it:

  multi_turn     U conversations of T turns; each turn resends the whole history (the server's
                 own answers as it returned them) plus a new user message (load/conversations.py)
  shared_prefix  G groups, each with its own shared prefix of P tokens and a unique suffix of
                 S tokens; a sweep over P/(P+S) beside the same lengths with nothing shared
                 (cases.py: a cached-depth case per group)
  trace          replay of a request trace (Mooncake JSONL with block hash ids, or plain JSONL
                 of lengths) at its own times (trace.py; sent by load/replay.py)

Every workload keeps the nonce discipline of the sweep: what should not be shared is unique
per request and per invocation (a nonce, or block ids salted per invocation), and what should
be shared is byte-identical. Each request's record says how many prompt tokens an ideal cache
would serve it (`expected_cached_tokens`) and how many at its end no cache can hold
(`unique_tokens`), so reported reuse can be set against both: less is eviction, more is leakage.

The specs (spec.py) are plain data for scenario.py; the runners (load/) build prompts through
load/prompts.py and send through the same client and records as every other case.

Real text (--dataset, dataset.py and dataset_cases.py; sent through load/dataset_load.py) is no
workload of its own but the text of one: a natural case (kind "dataset": each entry's prompt),
a sweep's prompts cut to length, or a multi-turn case's messages.
"""

KINDS = ("sweep", "multi_turn", "shared_prefix", "trace", "dataset")
