# Sourced by the GPU benchmark scripts that time this tree against an earlier version of itself
# in the same run (codec-ab.sh, env-ab.sh), not itself one.
# build_baseline SOURCE_TREE BUILD_DIR [UCX_PREFIX]: builds the earlier version's ucclzip-bench
# (logs in $OUT, named after BUILD_DIR) and prints its path; against Debian's UCX, or against the
# UCX of the libucx-cu13 wheel unpacked at UCX_PREFIX (scripts/gpu-run's $CU13_UCX), as
# scripts/gpu-run builds this tree's. A tree of a commit, e.g.
# `mkdir -p .gpu/wip/baseline && git archive <commit> | tar -x -C .gpu/wip/baseline` (about 4 MB:
# carry it).
build_baseline() {
  local source=$1 build=$2 ucx=${3:-}
  local -a configure=(cmake -S "$source" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
    -DUCCLZIP_BUILD_TESTS=OFF -DUCCLZIP_BUILD_EXAMPLES=OFF)
  # The wheel's .pc files name its build machine's prefix; --define-prefix maps them to UCX_PREFIX.
  [[ -n $ucx ]] && configure=(env -u PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH="$ucx/lib/pkgconfig" "${configure[@]}"
    -DPKG_CONFIG_ARGN=--define-prefix)
  "${configure[@]}" >"$OUT/configure-$build.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" --target ucclzip-bench >"$OUT/build-$build.log" 2>&1 &&
    echo "$build/benchmarks/ucclzip-bench"
}
