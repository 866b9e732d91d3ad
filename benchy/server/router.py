"""Whether the base URL is a router in front of replicas, and which, by what its own pages say.

Why: a cache-aware router (vllm-router, sglang-router) answers /metrics by passing it to one
replica. Its counts are then one replica's share of the run, and set beside the responses' usage
they look like a lie (128 generated tokens counted where usage added up to 256). Both routers
list their workers at GET /list_workers (`{"urls": [...]}`) and GET /workers (`{"workers":
[{"url": ...}]}`); where one does, benchy scrapes each replica's /metrics and adds them up.
"""

from __future__ import annotations

from benchy.server.pages import PageSource, json_of

ROUTER_PAGES = ("/list_workers", "/workers")
PAGE_TIMEOUT_S = 5.0


def _urls(answer: object) -> list[str]:
    if not isinstance(answer, dict):
        return []
    urls = answer.get("urls")
    if urls is None and isinstance(answer.get("workers"), list):
        urls = [w.get("url") for w in answer["workers"] if isinstance(w, dict)]
    if not isinstance(urls, list):
        return []
    return [u.rstrip("/") for u in urls if isinstance(u, str) and u.startswith(("http://", "https://"))]


async def replicas_named(pages: PageSource, root: str) -> tuple[str | None, list[str]]:
    """(the page that named them, the replicas' root URLs), or (None, []) where no page does."""
    for path in ROUTER_PAGES:
        urls = _urls(json_of(await pages.page("GET", root + path, None, PAGE_TIMEOUT_S)))
        if urls:
            return path, urls
    return None, []
