#!/usr/bin/env bash
# The event loop A/B (issue 26): the 512x256 run, table only, on uvloop and on asyncio in turn, 6 rounds;
# benchy pinned to 2 cores (4,5), the simulator to 4 others (0-3): run on a host of 6 or more cores, e.g.
# the H200 device from the repository root, after benchmarks/h200.sh on the same warm machine (it installs
# the carried wheels, uvloop among them, under /tmp/site).
export PYTHONPATH=/tmp/site:$PWD
taskset -c 0-3 python3 -m benchy sim --preset instant --port 18999 > /tmp/sim.log 2>&1 &
SIM=$!
for i in $(seq 30); do curl -s http://127.0.0.1:18999/health >/dev/null && break; sleep 0.5; done
for r in 1 2 3 4 5 6; do
  for L in uvloop asyncio; do
    BENCHY_EVENT_LOOP=$L taskset -c 4,5 /usr/bin/time -f "$L round $r: %U user %S sys %e wall" python3 -m benchy run \
      --base-url http://127.0.0.1:18999/v1 --pp 64 --tg 256 -c 256 --requests 512 --quiet > /tmp/run_${L}_${r}.txt 2>>/tmp/ab.txt
    grep -h "overloaded" /tmp/run_${L}_${r}.txt | cut -c1-160 | sed "s/^/  $L: /" >> /tmp/ab.txt
  done
done
kill $SIM
grep round /tmp/ab.txt
python3 - <<'P'
import re,statistics
d={}
for l in open('/tmp/ab.txt'):
    m=re.match(r"(\w+) round \d+: ([\d.]+) user ([\d.]+) sys",l)
    if m: d.setdefault(m[1],[]).append(float(m[2])+float(m[3]))
for k,v in d.items(): print(k, "median CPU-s", round(statistics.median(v),2), v)
u,a=d['uvloop'],d['asyncio']; print("ratio per round", [round(x/y,3) for x,y in zip(u,a)])
P
grep -c overloaded /tmp/ab.txt
