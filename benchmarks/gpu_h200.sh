#!/usr/bin/env bash
# benchy --gpu-metrics nvml beside a real llama-server on the H200 device (issue 28): power, energy per
# token and measured memory bandwidth next to the decode rate and the bandwidth ceiling.
#
# Run from the repository root on the device, with the GPU testbed carried as .gpu-testbed
# (cp -r ../shared/gpu-testbed .gpu-testbed; docs in its README.md); its data/whl/ holds the
# nvidia-ml-py wheel, which run_device.sh installs into /tmp/site with the others:
#   BUDGET_S=570 bash benchmarks/gpu_h200.sh [llama|oss]
# Steps: build (or unpack) llama-server, make the random-weight model, start llama-server
# (--cache-ram 0, 4 slots), then benchy run --gpu-metrics nvml at one stream and at 4, with
# nvidia-smi sampling the same GPU beside it as an independent witness of the power.
# Outputs in $OUT: summary.txt (benchmarks/gpu_summary.py's table), results.tar.gz.
set -u
ROOT=$(pwd); TB=${TB:-$ROOT/.gpu-testbed}
W=${W:-/tmp/tb}; OUT=${OUT:-$W/out}; PORT=${PORT:-8080}; BUDGET_S=${BUDGET_S:-560}
RES=$W/res; mkdir -p "$RES" "$W/models" "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; left() { echo $(( BUDGET_S - $(el) )); }
log() { echo "[t=$(el)s] $*" | tee -a "$RES/summary.txt"; }
snap() { cp "$RES/summary.txt" "$OUT/summary.txt"; tar czf "$OUT/results.tar.gz" -C "$W" res 2>/dev/null; }

MODEL=${1:-llama}
case $MODEL in
  llama) PRESET=llama3-8b; PROFILE=llama-3-8b; BYTES=8.0e9 ;;   # Q8_0: ~8.0 GB read per token (all but the embedding)
  oss)   PRESET=gpt-oss-20b; PROFILE=gpt-oss-20b; BYTES= ;;     # MXFP4 experts: the profile's active bytes
  *) echo "unknown model $MODEL (llama | oss)"; exit 2 ;;
esac

bash "$TB/run_device.sh" build >"$RES/build_phase.log" 2>&1; log "build: $(tail -2 "$RES/build_phase.log" | head -1)"
BIN=$W/bin; export LD_LIBRARY_PATH=$BIN:${LD_LIBRARY_PATH:-}
[ -x "$BIN/llama-server" ] || { log "no llama-server"; snap; exit 1; }
export PYTHONPATH=/tmp/site:$ROOT
python3 -c "import pynvml as n; n.nvmlInit(); print('NVML sees', n.nvmlDeviceGetCount(), 'GPU(s):', n.nvmlDeviceGetName(n.nvmlDeviceGetHandleByIndex(0)))" 2>&1 | tee -a "$RES/summary.txt"

FILE=$PRESET-random.gguf
[ -s "$W/models/$FILE" ] || PYTHONPATH=$TB/data/gguf-py:$PYTHONPATH python3 "$TB/gen_gguf.py" --preset "$PRESET" \
    --vocab "$TB/data/llama3_vocab.json.gz" --out "$W/models/$FILE" >"$RES/gen.log" 2>&1 || { log "gen failed"; snap; exit 1; }
"$BIN/llama-server" -m "$W/models/$FILE" -ngl 99 -c 32768 -np 4 -fa on --cache-ram 0 --metrics \
    --host 127.0.0.1 --port $PORT -a "random-$PRESET" >"$RES/server.log" 2>&1 &
SP=$!
for _ in $(seq 240); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null && break; kill -0 $SP || break; sleep 0.5; done
nvidia-smi --query-gpu=timestamp,power.draw,utilization.gpu,utilization.memory --format=csv,noheader,nounits \
    -lms 500 >"$RES/nvidia_smi.csv" 2>&1 &
SMI=$!
CEIL=(--hardware h200 --model-profile $PROFILE); [ -n "$BYTES" ] && CEIL+=(--active-bytes-per-token $BYTES)
log "benchy run --gpu-metrics nvml (left $(left)s)"
timeout $(( $(left) - 30 )) python3 -m benchy run --base-url http://127.0.0.1:$PORT/v1 --pp 512 2048 --tg 128 512 \
    -c 1 4 --runs 3 --warmup 1 "${CEIL[@]}" --gpu-metrics nvml -q -o "$RES/benchy_gpu" >"$RES/benchy_gpu.txt" 2>&1
log "benchy rc=$?"; cat "$RES/benchy_gpu.txt" | tee -a "$RES/summary.txt"
kill $SMI $SP 2>/dev/null; wait $SP 2>/dev/null
python3 "$ROOT/benchmarks/gpu_summary.py" "$RES/benchy_gpu/results.json" "$RES/nvidia_smi.csv" 2>&1 | tee -a "$RES/summary.txt"
log "done"; snap
