"""Typed verdicts: the closed set of warning codes (codes.py), the figures each carries
(details.py), and one module per trap that holds its threshold, the decision that withholds or
qualifies figures, and the words of its warning (queueing.py)."""
