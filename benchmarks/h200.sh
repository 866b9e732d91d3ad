#!/usr/bin/env bash
# benchy's truth claims on a real CUDA llama-server (the H200 GPU testbed), one step a word:
#   truth     default flags (-np 4): benchy run --pp 512 2048 8192 --tg 32 128 --runs 3 --gpu-metrics nvml,
#             then benchy's figures beside the server's own timings (issues 23, 28)
#   capacity  -np 16 --cache-ram 0: benchy capacity, cold and with a 75% shared prefix, then compare (issue 25)
#   queue     -np 1 --cache-ram 0: benchy run --rate 8 (an open loop on one slot): queueing qualified (issue 23)
#   workers   -np 8: benchy run -c 8 --workers 2 (the fork server's two worker processes), beside the server's timings (issue 26)
#   lengths   -np 4 --cache-ram 0: --pp 512 2048 8192 and --dataset sample --pp 512 2048, each request's prompt count against its target
#   apis      -np 4 --cache-ram 0: --pp 2048 --tg 128 through chat, responses and messages, and --no-stream
#   probecap  benchy probe-cache --capacity --cache-reset on -np 1 --cache-ram 0, -np 4 --cache-ram 0 and a
#             default server (-np 4, host-RAM cache on); PROBES picks among np1 nocache default (issue 24)
#   streams   no llama-server (and no build): benchmarks/bench_streams.py, benchy's stamps against paced stream
#             servers at 1,000-8,000 streams (issue 40), then its --costs 3 (per request and per token beside their
#             floors) if time is left; STREAMS_ARGS adds to the first's arguments. Alone it needs only the
#             carried wheels: BUDGET_S=540 bash benchmarks/h200.sh oss streams
# Run from the repository root on the device, with ../shared/gpu-testbed copied to .gpu-testbed
# (prebuilt binaries in .gpu-testbed/bin/ save the 5-minute build):
#   BUDGET_S=570 bash benchmarks/h200.sh oss truth capacity
# MODEL: oss (random gpt-oss-20b, MXFP4) | llama (random llama3-8b, Q8_0). Outputs in $OUT: summary.txt, results.tar.gz.
set -u
ROOT=$(pwd); TB=${TB:-$ROOT/.gpu-testbed}
W=${W:-/tmp/tb}; OUT=${OUT:-$W/out}; PORT=${PORT:-8080}; BUDGET_S=${BUDGET_S:-560}
RES=$W/res; mkdir -p "$RES" "$W/models" "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; left() { echo $(( BUDGET_S - $(el) )); }
log() { echo "[t=$(el)s] $*" | tee -a "$RES/summary.txt"; }
snap() { cp "$RES/summary.txt" "$OUT/summary.txt"; tar czf "$OUT/results.tar.gz" -C "$W" res 2>/dev/null; }

MODEL=${1:-oss}; shift
case $MODEL in
  llama) PRESET=llama3-8b; PROFILE=llama-3-8b ;;
  oss)   PRESET=gpt-oss-20b; PROFILE=gpt-oss-20b ;;
  *) echo "unknown model $MODEL (llama | oss)"; exit 2 ;;
esac
export PYTHONPATH=/tmp/site:$ROOT
FILE=$PRESET-random.gguf
U=http://127.0.0.1:$PORT/v1
BIN=$W/bin; export LD_LIBRARY_PATH=$BIN:${LD_LIBRARY_PATH:-}
NEEDS_SERVER=0; for step in "${@:-truth}"; do [ "$step" = streams ] || NEEDS_SERVER=1; done
if [ $NEEDS_SERVER = 1 ]; then
  bash "$TB/run_device.sh" build >"$RES/build_phase.log" 2>&1; log "build: $(tail -2 "$RES/build_phase.log" | head -1)"
  [ -x "$BIN/llama-server" ] || { log "no llama-server"; snap; exit 1; }
  [ -s "$W/models/$FILE" ] || PYTHONPATH=$TB/data/gguf-py:$PYTHONPATH python3 "$TB/gen_gguf.py" --preset "$PRESET" \
      --vocab "$TB/data/llama3_vocab.json.gz" --out "$W/models/$FILE" >"$RES/gen.log" 2>&1 || { log "gen failed"; snap; exit 1; }
else  # the wheels alone (what run_device.sh's build phase installs first), no build
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$TB"/data/whl/*.whl >"$RES/pip.log" 2>&1 || log "pip install of the carried wheels failed (pip.log)"
fi

serve() {  # NP FLAGS...: starts llama-server, sets SP
  local np=$1; shift
  "$BIN/llama-server" -m "$W/models/$FILE" -ngl 99 -c 65536 -np "$np" -fa on --host 127.0.0.1 --port $PORT \
      --metrics --slots -a "random-$PRESET" "$@" >"$RES/server_np${np}_$(el)s.log" 2>&1 &
  SP=$!
  for _ in $(seq 240); do
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null && { log "llama-server -np $np $*"; return 0; }
    kill -0 $SP 2>/dev/null || break; sleep 0.5
  done
  log "llama-server -np $np $* did not come up"; return 1
}
unserve() { kill $SP 2>/dev/null; wait $SP 2>/dev/null; }
bench() {  # TAG ARGS...: python3 -m benchy ARGS within the budget, its stdout into the summary
  local tag=$1; shift
  timeout $(( $(left) - 15 )) python3 -m benchy "$@" >"$RES/$tag.txt" 2>"$RES/$tag.err"
  log "$tag rc=$?"; tee -a "$RES/summary.txt" <"$RES/$tag.txt"; snap
}

truth() {
  serve 4 || return
  bench truth run --base-url $U --pp 512 2048 8192 --tg 32 128 --runs 3 --warmup 1 --hardware h200 \
      --model-profile $PROFILE --gpu-metrics nvml -o "$RES/truth"
  python3 "$TB/summarize_benchy.py" "$RES/truth" 2>&1 | tee -a "$RES/summary.txt"
  python3 "$ROOT/benchmarks/gpu_summary.py" "$RES/truth/results.json" 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

capacity() {
  serve 16 --cache-ram 0 || return
  local w extra
  for w in cold shared; do
    extra=(); [ $w = shared ] && extra=(--shared-prefix 0.75)
    bench capacity_$w capacity --base-url $U --pp 2048 --tg 128 "${extra[@]}" --slo "${CAP_SLO:-ttft=1s,itl=30ms}" \
        --goodput 0.9 --max 64 --max-requests 120 -o "$RES/capacity_$w"
    python3 "$ROOT/benchmarks/capacity_summary.py" "$RES/capacity_$w" 2>&1 | tee -a "$RES/summary.txt"
  done
  python3 -m benchy compare "$RES/capacity_cold" "$RES/capacity_shared" 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

probecap() {
  local name
  mkdir -p /tmp/slots  # --slot-save-path: llama.cpp's slot erase, which --cache-reset calls
  for name in ${PROBES:-np1 nocache default}; do
    case $name in
      np1) serve 1 --cache-ram 0 --slot-save-path /tmp/slots || continue ;;
      nocache) serve 4 --cache-ram 0 --slot-save-path /tmp/slots || continue ;;
      *) serve 4 --slot-save-path /tmp/slots || continue ;;
    esac
    bench probecap_${MODEL}_$name probe-cache --base-url $U --capacity --capacity-prefix-tokens ${CAP_PREFIX:-2048} \
        --capacity-max-tokens ${CAP_MAX:-262144} --tg 2 --cache-reset -o "$RES/probecap_${MODEL}_$name"
    unserve
  done
}

queue() {  # an open loop on one slot: TTFT under load against the same shape sent alone
  serve 1 --cache-ram 0 || return
  bench queue_$MODEL run --base-url $U --pp 2048 --tg 32 --rate 8 --requests 16 --model-profile $PROFILE \
      -o "$RES/queue_$MODEL"
  python3 "$TB/summarize_benchy.py" "$RES/queue_$MODEL" 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

workers() {  # the load split over two worker processes, each request's figures beside the server's own
  serve 8 || return
  bench workers_$MODEL run --base-url $U --pp 512 --tg 128 -c 8 --runs 2 --workers 2 --model-profile $PROFILE \
      -o "$RES/workers_$MODEL"
  python3 "$TB/summarize_benchy.py" "$RES/workers_$MODEL" 2>&1 | tee -a "$RES/summary.txt"
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases'][0]['client']; print('workers', c['workers'], [(w['requests'], w['tokens']) for w in c['per_worker']])" \
      "$RES/workers_$MODEL/results.json" 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

lengths() {  # exact prompt lengths on the real Llama-3 tokenizer (issue 35), and a healthy run's warnings
  serve 4 --cache-ram 0 || return
  bench lengths_$MODEL run --base-url $U --pp 512 2048 8192 --tg 32 --runs 3 -o "$RES/lengths_$MODEL"
  bench dataset_$MODEL run --base-url $U --dataset sample --pp 512 2048 --tg 32 --runs 3 -o "$RES/dataset_$MODEL"
  python3 "$ROOT/benchmarks/h200_requests.py" "$RES/lengths_$MODEL" "$RES/dataset_$MODEL" 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

apis() {  # the same sweep through chat, Responses and Messages on one server (issue 38), then unstreamed
  serve 4 --cache-ram 0 || return
  local ep
  for ep in chat responses messages; do
    bench api_${MODEL}_$ep run --base-url $U --endpoint $ep --pp 2048 --tg 128 --runs 5 -o "$RES/api_${MODEL}_$ep"
  done
  bench api_${MODEL}_nostream run --base-url $U --no-stream --pp 2048 --tg 128 --runs 3 -o "$RES/api_${MODEL}_nostream"
  python3 "$ROOT/benchmarks/h200_requests.py" "$RES"/api_${MODEL}_*/ 2>&1 | tee -a "$RES/summary.txt"
  unserve
}

streams() {  # benchy's stamps at 1,000-8,000 paced streams; no llama-server (bench_streams.py)
  log "streams: $(nproc) cores, open files $(ulimit -Hn)"
  timeout $(( $(left) - 10 )) python3 "$ROOT/benchmarks/bench_streams.py" ${STREAMS_ARGS:-} \
      >"$RES/streams.txt" 2>"$RES/streams.err"
  log "streams rc=$?"; tee -a "$RES/summary.txt" <"$RES/streams.txt"; tail -8 "$RES/streams.err" | tee -a "$RES/summary.txt"; snap
  [ "$(left)" -gt 150 ] || { log "skip costs (left $(left)s)"; return; }
  timeout $(( $(left) - 10 )) python3 "$ROOT/benchmarks/bench_streams.py" --costs 3 >"$RES/costs.txt" 2>"$RES/costs.err"
  log "costs rc=$?"; tee -a "$RES/summary.txt" <"$RES/costs.txt"; tail -4 "$RES/costs.err" | tee -a "$RES/summary.txt"; snap
}

for step in "${@:-truth}"; do
  [ "$(left)" -gt 60 ] || { log "skip $step (left $(left)s)"; continue; }
  "$step"
done
log "done; total $(el)s"; snap
