"""Warnings about a run: pure functions of saved results, never writing into them."""
