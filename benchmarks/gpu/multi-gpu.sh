#!/usr/bin/env bash
# Several GPUs of one host, one process per GPU (issue 12; docs/MULTI_GPU.md): every collective
# and the send/recv ring with device buffers, compressed and not, checked exactly, side by side
# with NCCL in the same run:
#   ucclzip   `ucclzip-bench <op> --ranks N --memory device --compress off,on,auto -c 1 --json`,
#             staged through host memory (Debian's UCX, $BUILD) and direct (the CUDA-enabled UCX
#             that scripts/gpu-run builds into $CU13_BUILD, where it did);
#   nccl      benchmarks/nccl_driver.c against the machine's libnccl.so ($BUILD/benchmarks/nccl_driver);
#   shim      the same driver against ucclzip's NCCL API (nccl_driver_ucclzip), where it is built,
#             with UCCLZIP_COMPRESS off, on and auto;
# then the codec alone on GPU 0 at the pipeline block size, for its in-pipeline cost beside it.
# benchmarks/multi_gpu_summary.py prints the tables and the issue's ratios and writes
# $OUT/multi-gpu-summary.jsonl. NVLink multicast stays off: NCCL_NVLS_ENABLE=0 everywhere.
#   OPS      operations (default: allreduce allgather reducescatter broadcast reduce sendrecv)
#   DTYPES   default: bf16 fp16 fp32          DIST  ucclzip-bench's tensors (default gaussian:0.02)
#   MIN_BYTES MAX_BYTES FACTOR   sizes (default 1M 1G 4: 1M 4M 16M 64M 256M 1G)
#   ITERS WARMUP                 ucclzip-bench per mode (default 5 and 2: modes take turns)
#   DRIVER_ITERS DRIVER_WARMUP   the NCCL driver (default 20 and 5, back to back as nccl-tests)
#   PATHS    ucclzip's paths (default: staged direct)     SHIM_COMPRESS  default: off on auto
#   STAGED_TLS DIRECT_TLS   --tls for each path (default: UCX's choice)
#   CASE_TIMEOUT  seconds per command (default 600)   BUDGET  seconds after which no case starts (0: none)
#   FORCE_RANKS   run that many ranks on fewer GPUs (they share them; for trying the script on
#                 the one-GPU machine). NCCL 2.28 refuses two ranks of one host on one GPU
#                 ("Duplicate GPU detected", ncclInvalidUsage), so real NCCL is skipped then,
#                 unless FAKE_HOSTS=1: each rank gets its own NCCL_HOSTID, so NCCL takes the
#                 ranks for separate hosts and joins them over sockets on loopback (a check of
#                 the driver, not a figure of NVLink).
#   MEMORY   device (default) or host: ucclzip-bench alone on host buffers, a dry run of this
#            script's flow on a machine without a GPU.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-build}
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
memory=${MEMORY:-device}
ops=${OPS:-allreduce allgather reducescatter broadcast reduce sendrecv}
dtypes=${DTYPES:-bf16 fp16 fp32}
sizes=(-b "${MIN_BYTES:-1M}" -e "${MAX_BYTES:-1G}" -f "${FACTOR:-4}")
limit=${CASE_TIMEOUT:-600}
budget=${BUDGET:-0}
dist=${DIST:-gaussian:0.02}
results="$OUT/multi-gpu.jsonl"
: >"$results"

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
ranks=${FORCE_RANKS:-$gpus}
if [[ -z ${FORCE_RANKS:-} && $gpus -lt 2 ]]; then
  echo "multi-gpu.sh: $gpus GPU(s) here; it runs one process per GPU and needs 2 or more (the" \
       "nvidia-h200-x2 or -x4 kind). FORCE_RANKS=n runs n processes on the GPUs there are, for trying it." >&2
  exit 2
fi
[[ $ranks =~ ^[1-9][0-9]*$ && $ranks -ge 2 ]] || { echo "multi-gpu.sh: FORCE_RANKS=$ranks: 2 or more ranks" >&2; exit 2; }
shared=0
((ranks > gpus)) && shared=1
{
  echo "GPUs: $gpus; ranks: $ranks; memory: $memory; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  nvidia-smi nvlink --status 2>&1 | head -40
} >"$OUT/multi-gpu-machine.txt"
head -1 "$OUT/multi-gpu-machine.txt"

# The paths ucclzip runs over: the bench, its UCX's environment, its NCCL-API driver.
declare -A path_bench path_env path_tls
for path in ${PATHS:-staged direct}; do
  case $path in
    staged)
      path_bench[staged]=$build
      path_env[staged]=""
      path_tls[staged]=${STAGED_TLS:-} ;;
    direct)
      cu13=${CU13_UCX:-/tmp/libucx-cu13/libucx}
      if [[ -z ${CU13_BUILD:-} || ! -x ${CU13_BUILD}/benchmarks/ucclzip-bench || ! -d $cu13/lib ]]; then
        echo "direct path skipped: no build against the CUDA-enabled UCX (CU13_BUILD='${CU13_BUILD:-}', CU13_UCX=$cu13;" \
             "scripts/gpu-gather --cuda-ucx, then scripts/gpu-run builds it)"
        continue
      fi
      path_bench[direct]=$CU13_BUILD
      path_env[direct]="LD_LIBRARY_PATH=$cu13/lib:${LD_LIBRARY_PATH:-} UCX_MODULE_DIR=$cu13/lib/ucx PATH=$cu13/bin:$PATH"
      path_tls[direct]=${DIRECT_TLS:-} ;;
    *) echo "multi-gpu.sh: PATHS: unknown path '$path' (staged, direct)" >&2; exit 2 ;;
  esac
done

started=$SECONDS
skipped=()
# over_budget CASE: true (and the case noted) once BUDGET seconds have passed.
over_budget() {
  ((budget > 0 && SECONDS - started > budget)) || return 1
  skipped+=("$1")
  return 0
}

# tagged TAGS LOG COMMAND...: runs COMMAND within the case timeout, appends its JSON lines
# (a launcher's "[rank 0] " taken off) with TAGS in front, keeps its output in LOG.
tagged() {
  local tags=$1 log=$2
  shift 2
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  sed -n -e 's/^\[rank 0\] {/{/' -e "s/^{/{$tags,/p" "$log" >>"$results"
  local outcome=""
  ((rc == 0)) || outcome=", FAILED (rc $rc): $(grep -v '^{' "$log" | tail -c 400 | tr '\n' ' ')"
  echo "  $(basename "$log" .log): $((SECONDS - t0)) s$outcome"
}

ucclzip_case() {
  local path=$1 op=$2 dtype=$3
  local bench=${path_bench[$path]}/benchmarks/ucclzip-bench
  local args=(--ranks "$ranks" --memory "$memory" --compress "off,on,auto" "${sizes[@]}" -n "${ITERS:-5}"
              -w "${WARMUP:-2}" -d "$dtype" --dist "$dist" --json)
  [[ -n ${path_tls[$path]} ]] && args+=(--tls "${path_tls[$path]}")
  if [[ $op == sendrecv ]]; then args+=(--latency_iters 0); else args+=(-c 1 -r 0); fi
  # shellcheck disable=SC2086  # the path's environment: words of VAR=VALUE
  tagged "\"impl\":\"ucclzip\",\"ucx\":\"$path\"" "$OUT/ucclzip-$path-$op-$dtype.log" \
    env ${path_env[$path]} "$bench" "$op" "${args[@]}"
}

# driver_case TAGS NAME DRIVER OP DTYPE [VAR=VALUE...]: the NCCL driver as one process per rank
# (scripts/ucclzip-run), with the variables given; its lines tagged, its output in NAME.log.
driver_case() {
  local tags=$1 name=$2 driver=$3 op=$4 dtype=$5
  shift 5
  local id="$OUT/ids/$name-$op-$dtype"
  mkdir -p "$OUT/ids" && rm -f "$id"
  local per_rank=()
  # Separate host ids make NCCL take ranks that share a GPU for ranks of separate hosts.
  # shellcheck disable=SC2016  # expanded by that shell, per rank
  ((shared)) && per_rank=(sh -c 'export NCCL_HOSTID=multi-gpu-rank-$UCCLZIP_RANK; exec "$@"' sh)
  tagged "$tags" "$OUT/$name-$op-$dtype.log" \
    env NCCL_DRIVER_ID_FILE="$id" NCCL_DRIVER_TIMEOUT="$limit" "$@" \
    "$root/scripts/ucclzip-run" -n "$ranks" --timeout "$limit" "${per_rank[@]}" "$driver" "$op" "${sizes[@]}" \
    -n "${DRIVER_ITERS:-20}" -w "${DRIVER_WARMUP:-5}" -d "$dtype" -c 1 -r 0 --json
}

nccl_driver=$build/benchmarks/nccl_driver
run_nccl=1
if [[ $memory != device ]]; then
  run_nccl=0
elif [[ ! -x $nccl_driver ]]; then
  echo "NCCL skipped: $nccl_driver was not built (CMake found no nccl.h or libnccl.so)"; run_nccl=0
elif ((shared)) && [[ ${FAKE_HOSTS:-0} != 1 ]]; then
  echo "NCCL skipped: $ranks ranks on $gpus GPU(s), which NCCL refuses (FAKE_HOSTS=1 tries it over loopback sockets)"
  run_nccl=0
fi
nccl_env=()
((shared)) && nccl_env=(NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1)
declare -A shim_driver
if [[ $memory == device ]]; then
  for path in "${!path_bench[@]}"; do
    driver=${path_bench[$path]}/benchmarks/nccl_driver_ucclzip
    [[ -x $driver ]] && shim_driver[$path]=$driver
  done
  ((${#shim_driver[@]})) || echo "ucclzip's NCCL API skipped: no nccl_driver_ucclzip built"
fi

for dtype in $dtypes; do
  for op in $ops; do
    for path in staged direct; do
      [[ -n ${path_bench[$path]:-} ]] || continue
      over_budget "ucclzip $path $op $dtype" || ucclzip_case "$path" "$op" "$dtype"
    done
    if ((run_nccl)) && ! over_budget "nccl $op $dtype"; then
      driver_case '"impl":"nccl"' nccl "$nccl_driver" "$op" "$dtype" "${nccl_env[@]}"
    fi
    for path in staged direct; do
      [[ -n ${shim_driver[$path]:-} ]] || continue
      for mode in ${SHIM_COMPRESS:-off on auto}; do
        over_budget "shim $path $mode $op $dtype" && continue
        # shellcheck disable=SC2086  # the path's environment: words of VAR=VALUE
        driver_case "\"impl\":\"ucclzip_nccl\",\"ucx\":\"$path\",\"compress\":\"$mode\"" "shim-$path-$mode" \
          "${shim_driver[$path]}" "$op" "$dtype" UCCLZIP_COMPRESS="$mode" ${path_env[$path]}
      done
    done
  done
done

# The codec alone, on one GPU, at the pipeline block size the benchmarks used.
codec="$OUT/multi-gpu-codec.jsonl"
: >"$codec"
if [[ $memory == device ]] && ((gpus > 0)); then
  block=$(grep -o '"pipeline_block":[0-9]*' "$results" | head -1 | cut -d: -f2)
  for dtype in $dtypes; do
    CUDA_VISIBLE_DEVICES=0 timeout -k 10 "$limit" "$build/benchmarks/ucclzip-bench" codec --device gpu --json --iters 30 \
      --warmup 5 --dtype "$dtype" --dist "$dist" --bytes "${block:-16777216}" >>"$codec" 2>"$OUT/codec-$dtype.err" ||
      echo "codec $dtype failed: $(tail -c 300 "$OUT/codec-$dtype.err")"
  done
fi
rm -rf "$OUT/ids"
((${#skipped[@]})) && printf 'not run (BUDGET=%s s reached): %s\n' "$budget" "$(IFS=';'; echo "${skipped[*]}")"
python3 "$root/benchmarks/multi_gpu_summary.py" "$results" "$codec" "$OUT/multi-gpu-summary.jsonl" |
  tee "$OUT/multi-gpu-summary.txt"
