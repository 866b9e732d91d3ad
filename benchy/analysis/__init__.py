"""The analysis stage: a run's saved bundle (manifest.json + requests.jsonl) in, its results out.

bundle.py reads and writes the bundle; analyze.py turns it into the RunResult that results.json,
the table and report.md show. The live run and `benchy rebuild` go through the same analyze().
"""
