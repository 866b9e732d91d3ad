"""`benchy capacity`: the highest load at which a server still meets an SLO.

search.py decides which load to probe and how many requests to send there (pure, no I/O);
runner.py measures each probe with run.py's machinery; types.py is capacity.json's typed shape.
The report (Pareto figure, table) is benchy/report/capacity.py. docs/capacity.md explains it.
"""
