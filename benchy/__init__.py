"""benchy: a cache-aware throughput/latency benchmark for OpenAI-compatible LLM servers."""

__version__ = "0.1.0"
