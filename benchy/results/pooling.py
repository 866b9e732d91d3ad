"""Which cases went to a pooling endpoint (embeddings, rerank): they read inputs and generate no
token, so no output or stream figure exists for them (docs/embeddings.md). Named here for the
checks and the reports, which read results and may not read the plan's package (workloads/)."""

from __future__ import annotations

from benchy.workloads.case import POOLING_ENDPOINTS as POOLING_ENDPOINTS


def is_pooling(endpoint: str | None) -> bool:
    return endpoint in POOLING_ENDPOINTS
