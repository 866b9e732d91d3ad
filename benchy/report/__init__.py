"""The report stage: table, report.md, figures, CSV and compare, made from saved results only."""
