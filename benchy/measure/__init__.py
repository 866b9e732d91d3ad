"""Records to figures: evidence weighed once, every metric computed once in the registry, statistics."""
