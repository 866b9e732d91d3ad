"""The HTTP/SSE client: one request out, what arrived and when back. Knows nothing of statistics."""
