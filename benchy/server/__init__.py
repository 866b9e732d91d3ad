"""The server's own account: who is serving (identity) and its Prometheus /metrics per case."""
