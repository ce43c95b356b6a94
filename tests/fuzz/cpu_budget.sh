#!/usr/bin/env bash
# cpu_budget.sh — a fuzz campaign measured in CPU time, not wall time, for a shared machine:
# each target runs under nice 19 until its process has used SECONDS of CPU (user + sys, read
# from /proc/PID/stat), then gets SIGINT (libFuzzer prints its final stats when interrupted).
#
#   make -f tests/fuzz/Makefile all corpus-ours corpus-tok FUZZ_BUILD=build-fuzz-campaign
#   tests/fuzz/cpu_budget.sh build-fuzz-campaign 600 gguf tok config ...
# Logs go to BUILD/campaign_<target>.log; the last line of each is
#   stat::cpu_seconds_measured: N wall W rc R      (R = 72: interrupted, as planned)
set -u
B=$1; budget=$2; shift 2
export FUZZ_FIXTURES=$(cd "$B" && pwd)/fixtures TMPDIR=/dev/shm
tck=$(getconf CLK_TCK)
for t in "$@"; do
  mkdir -p "$B/found_$t"
  log=$B/campaign_$t.log
  start=$(date +%s)
  nice -n 19 "$B/fuzz_$t" -max_total_time=1000000 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$B/crash_$t-" "$B/found_$t" "$B/corpus/$t" > "$log" 2>&1 &
  pid=$! cpu=0
  while kill -0 $pid 2>/dev/null; do
    sleep 5
    read -r ut st < <(awk '{print $14, $15}' /proc/$pid/stat 2>/dev/null || echo "0 0")
    cpu=$(( (ut + st) / tck ))
    if [ "$cpu" -ge "$budget" ]; then kill -INT $pid; break; fi
  done
  wait $pid; rc=$?
  echo "stat::cpu_seconds_measured: $cpu wall $(( $(date +%s) - start )) rc $rc" >> "$log"
  tail -n 1 "$log"
done
# libFuzzer's slow-unit-* files mark an input that took over 10 s of wall time once; on a shared
# machine that is usually the machine, so each is replayed and its time printed (a real slow
# input shows here again). Crashes, leaks, timeouts and out-of-memory inputs fail the campaign.
for f in "$B"/crash_*-slow-unit-*; do
  [ -e "$f" ] || continue
  t=${f##*/crash_}; t=${t%%-slow-unit-*}
  /usr/bin/time -f "slow unit replayed: $f in %e s wall" "$B/fuzz_$t" "$f" > /dev/null 2> "$f.replay" || true
  tail -n 1 "$f.replay"
done
if ls "$B"/crash_* 2> /dev/null | grep -v -e '-slow-unit-' > /dev/null; then
  echo "crashing inputs:"; ls "$B"/crash_* | grep -v -e '-slow-unit-'; exit 1
fi
