"""benchy sim: an embedded OpenAI-compatible server whose timing is known exactly.

Imports nothing from benchy's client side: only benchy.tokenizer and benchy.__version__.
"""
