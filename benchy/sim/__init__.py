"""benchy sim: an embedded OpenAI-compatible server whose timing is known exactly.

Imports nothing from benchy's client or measuring side, only benchy.__version__: its tokenizer
is its own (vocab.py), never benchy's o200k, so that benchy's local count disagrees with this
server's usage as it does with every real server's (tests/test_sim.py checks the imports).
"""
