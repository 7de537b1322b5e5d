# Sourced by the GPU benchmark scripts (not itself one: gpu-run runs the *.sh files).
# ucx_perftest: the server (no host argument) waits on a port; the client connects and reports.
# Prints the client's "Final:" line: iterations, 50%ile/avg/overall latency (us), avg/overall
# bandwidth (MB/s, MB = 2^20), avg/overall message rate. PERFTEST_MEMORY (e.g. cuda) sets both
# sides' buffer memory (ucx_perftest -m).
perftest() {
  local name=$1 tls=$2 test=$3 size=$4 n=$5
  local memory=()
  [[ -n ${PERFTEST_MEMORY:-} ]] && memory=(-m "$PERFTEST_MEMORY")
  # Below the kernel's ephemeral ports (32768 on), which UCX's own listeners take; a port that is
  # taken all the same (the server's "bind() failed: Address already in use") gets another try.
  local first_port=${PERFTEST_PORT:-$((20000 + RANDOM % 10000))} attempt
  for attempt in 0 1 2; do
    local port=$((first_port + 1000 * attempt))
    UCX_TLS=$tls ucx_perftest -t "$test" -s "$size" -n "$n" -p "$port" "${memory[@]}" >"$OUT/perftest-$name-$test-server.log" 2>&1 &
    local server=$!
    local client_rc=1
    for _ in $(seq 50); do  # the server needs a moment to listen
      sleep 0.1
      # A server that could not bind is gone, and whatever holds its port is not a perftest server.
      kill -0 "$server" 2>/dev/null || break
      if UCX_TLS=$tls ucx_perftest 127.0.0.1 -t "$test" -s "$size" -n "$n" -p "$port" "${memory[@]}" \
           >"$OUT/perftest-$name-$test.log" 2>&1; then client_rc=0; break; fi
    done
    # A server still waiting when no client got through would wait for ever, and the call with it.
    [[ $client_rc == 0 ]] || kill "$server" 2>/dev/null
    wait "$server" || true
    if [[ $client_rc == 0 ]]; then
      grep '^Final:' "$OUT/perftest-$name-$test.log"
      return 0
    fi
    grep -q "Address already in use" "$OUT/perftest-$name-$test-server.log" || break
  done
  echo "ucx_perftest $test over $name failed, see $OUT/perftest-$name-$test.log" >&2
  return 1
}


# perftest_pairs NAME TLS TEST SIZE N PAIRS: PAIRS client/server pairs at once, as the links of
# a ring or chain run at once; prints each client's "Final:" line. On one host the pairs share
# its memory bandwidth and cores, which a lone pair has to itself.
perftest_pairs() {
  local name=$1 tls=$2 test=$3 size=$4 n=$5 pairs=$6
  local pids=() p
  # A port each: subshells started together drew the same $RANDOM, and of two servers on one
  # port the second failed to bind (H200 run s24-1: 2 of 4 pairs lost).
  local base=$((20000 + RANDOM % 10000))
  for ((p = 0; p < pairs; p++)); do
    OUT=$OUT/pairs-$pairs-$p PERFTEST_PORT=$((base + p)) perftest_into "$name" "$tls" "$test" "$size" "$n" &
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
