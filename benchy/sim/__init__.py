"""benchy sim: an embedded OpenAI-compatible server whose timing is known exactly.

Imports nothing from benchy's client side: only benchy.measure.tokenizer and benchy.__version__.
"""
