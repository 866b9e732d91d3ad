"""Is the answer still an answer? Output sanity (issue 55).

A broken kernel streams garbage at full speed, and garbage makes the most convincing
throughput figures of all. This package reads each saved answer's text (requests.jsonl keeps
it whole) and says whether it still looks like language: text.py judges one answer,
scripts.py knows the writing systems and the characters no model should print, tally.py sums a
case's answers into the figures results.json keeps (case.sanity), and the check in
checks/sanity.py turns them into the `output_garbage` verdict. canary.py holds the opt-in
canary's prompts, how an answer is judged and what changed between two runs (`--canary`;
load/canary.py sends them). Everything here is pure: text in, figures out.
"""
