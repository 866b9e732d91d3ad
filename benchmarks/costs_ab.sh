#!/usr/bin/env bash
# Client CPU per request and per token of two or more trees, one `bench_streams.py --costs 1`
# round of each in turn (a shared or lent machine drifts within minutes: a tree's rounds must
# alternate with the other's, not follow one another), then each tree's medians.
#   bash benchmarks/costs_ab.sh OLD_CHECKOUT .            # ROUNDS=5 by default
#   git archive OLD benchy benchmarks pyproject.toml | tar -x --one-top-level=.ab/old   # an old tree
# On the H200 host, with ../shared/gpu-testbed carried as .gpu-testbed: TB=.gpu-testbed bash … (installs its wheels)
set -u
ROUNDS=${ROUNDS:-5}
if [ -n "${TB:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$TB"/data/whl/*.whl >/tmp/costs_ab_pip.log 2>&1 || echo "pip install of the carried wheels failed"
  export PYTHONPATH=/tmp/site:$(pwd)
fi
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LOG=$(mktemp)
for _ in $(seq "$ROUNDS"); do
  for tree in "$@"; do
    line=$("$PY" "$tree/benchmarks/bench_streams.py" --costs 1 2>&1 | grep "costs round")
    echo "$tree ${line#*: }" | tee -a "$LOG"
  done
done
"$PY" - "$LOG" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tree, rest = line.split(" ", 1)
    rows.setdefault(tree, []).append(dict((k, float(v)) for k, v in re.findall(r"(\w+) ([\d.]+)", rest)))
for tree, runs in rows.items():
    keys = runs[0].keys()
    print(tree + ": " + ", ".join(f"{k} {statistics.median(r[k] for r in runs):.1f}" for k in keys), f"(medians of {len(runs)})")
PY
rm -f "$LOG"
