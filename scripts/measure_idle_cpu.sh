#!/usr/bin/env bash
# CPU of a headless Lockstep run while every persona waits on a loopback model.
#   scripts/measure_idle_cpu.sh BIN [DELAY_S] [WINDOW_S]
# DELAY_S: how long the model takes per chat answer (default 30: nothing lands in the window;
# 0.1: answers keep landing, so the run wakes often). WINDOW_S: how long CPU is counted
# (default 30), from 5 s after the start. BIN needs the `http` feature.
set -u
BIN=$1
DELAY=${2:-30}
WINDOW=${3:-30}
PORT=18931
python3 "$(dirname "$0")/slow_model_server.py" $PORT "$DELAY" & SRV=$!
sleep 1
OUT=$(mktemp -d)
$BIN run --hours 48 --personas 5 --out $OUT/run --no-progress --llm-backend http --llm-base-url http://127.0.0.1:$PORT/v1 --llm-model m --llm-timeout 120 > $OUT/log 2>&1 &
PID=$!
sleep 5
tick=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$PID/stat)
t0=$(date +%s.%N)
sleep "$WINDOW"
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$PID/stat)
t1=$(date +%s.%N)
python3 -c "
u=($u1-$u0)/$tick; s=($s1-$s0)/$tick; wall=$t1-$t0
print(f'model answers in ${DELAY} s: user {u:.2f} s + sys {s:.2f} s over {wall:.1f} s wall = {100*(u+s)/wall:.2f} % of one core')"
echo "threads: $(ls /proc/$PID/task | wc -l)"
kill $PID $SRV 2>/dev/null
rm -rf "$OUT"
