# Sourced by the GPU benchmark scripts (not itself one: gpu-run runs the *.sh files).
# ucx_perftest: the server (no host argument) waits on a port; the client connects and reports.
# Prints the client's "Final:" line: iterations, 50%ile/avg/overall latency (us), avg/overall
# bandwidth (MB/s, MB = 2^20), avg/overall message rate. PERFTEST_MEMORY (e.g. cuda) sets both
# sides' buffer memory (ucx_perftest -m).
perftest() {
  local name=$1 tls=$2 test=$3 size=$4 n=$5
  local port=$((20000 + RANDOM % 20000))
  local memory=()
  [[ -n ${PERFTEST_MEMORY:-} ]] && memory=(-m "$PERFTEST_MEMORY")
  UCX_TLS=$tls ucx_perftest -t "$test" -s "$size" -n "$n" -p "$port" "${memory[@]}" >"$OUT/perftest-$name-$test-server.log" 2>&1 &
  local server=$!
  local client_rc=1
  for _ in $(seq 50); do  # the server needs a moment to listen
    sleep 0.1
    if UCX_TLS=$tls ucx_perftest 127.0.0.1 -t "$test" -s "$size" -n "$n" -p "$port" "${memory[@]}" \
         >"$OUT/perftest-$name-$test.log" 2>&1; then client_rc=0; break; fi
  done
  wait "$server" || true
  [[ $client_rc == 0 ]] || { echo "ucx_perftest $test over $name failed, see $OUT/perftest-$name-$test.log" >&2; return 1; }
  grep '^Final:' "$OUT/perftest-$name-$test.log"
}


# perftest_pairs NAME TLS TEST SIZE N PAIRS: PAIRS client/server pairs at once, as the links of
# a ring or chain run at once; prints each client's "Final:" line. On one host the pairs share
# its memory bandwidth and cores, which a lone pair has to itself.
perftest_pairs() {
  local name=$1 tls=$2 test=$3 size=$4 n=$5 pairs=$6
  local pids=() p
  for ((p = 0; p < pairs; p++)); do
    OUT=$OUT/pairs-$pairs-$p perftest_into "$name" "$tls" "$test" "$size" "$n" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for ((p = 0; p < pairs; p++)); do cat "$OUT/pairs-$pairs-$p/final.txt" 2>/dev/null; done
}

# perftest_into: perftest, its Final: line kept in $OUT/final.txt.
perftest_into() {
  mkdir -p "$OUT"
  perftest "$@" >"$OUT/final.txt"
}
