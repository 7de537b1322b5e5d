#!/usr/bin/env bash
# Three ranks on two "hosts" (network namespaces of their own, joined by a veth pair) form their
# communicators through the NCCL API. Rank 0's host is advertised by a name that resolves to
# 127.0.1.1 on that host, as Debian's /etc/hosts has it, and to its address on the other: the
# rank beside rank 0 reaches it over loopback, and the rank of the other host must still reach
# that rank (bootstrap_wire.h, MeshHost). Needs root and iproute2 (CI has both); exits 77, which
# ctest reports as skipped, without them.
#   two_hosts_test.sh PROGRAM     PROGRAM: nccl_api_test (one rank a process, UCCLZIP_RANK)
set -uo pipefail
program=$1
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
  echo "skipped: needs root and iproute2 for network namespaces"
  exit 77
fi
tag=$$
host_a=uz2h-a-$tag host_b=uz2h-b-$tag name=uzhost-$tag
dir=$(mktemp -d)
cleanup() {
  ip netns del "$host_a" 2>/dev/null
  ip netns del "$host_b" 2>/dev/null
  rm -rf "/etc/netns/$host_a" "/etc/netns/$host_b" "$dir"
}
trap cleanup EXIT
if ! ip netns add "$host_a" || ! ip netns add "$host_b"; then
  echo "skipped: cannot create network namespaces here"
  exit 77
fi
set -e
ip link add "uz2a-$tag" type veth peer name "uz2b-$tag"
ip link set "uz2a-$tag" netns "$host_a"
ip link set "uz2b-$tag" netns "$host_b"
ip -n "$host_a" addr add 10.78.0.1/24 dev "uz2a-$tag"
ip -n "$host_b" addr add 10.78.0.2/24 dev "uz2b-$tag"
for ns in "$host_a" "$host_b"; do ip -n "$ns" link set lo up; done
ip -n "$host_a" link set "uz2a-$tag" up
ip -n "$host_b" link set "uz2b-$tag" up
# `ip netns exec` puts /etc/netns/NAME/hosts in place of /etc/hosts for the program.
mkdir -p "/etc/netns/$host_a" "/etc/netns/$host_b"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$name" >"/etc/netns/$host_a/hosts"
printf '127.0.0.1 localhost\n10.78.0.1 %s\n' "$name" >"/etc/netns/$host_b/hosts"
set +e
# run NAMESPACE RANK
run() {
  ip netns exec "$1" env UCCLZIP_RANK="$2" UCCLZIP_WORLD_SIZE=3 UCCLZIP_HOST="$name" UCCLZIP_BOOTSTRAP_TIMEOUT=20 \
    UCX_TLS=tcp timeout -k 5 100 "$program" "$dir/id" >"$dir/rank$2.log" 2>&1
}
run "$host_a" 0 & rank0=$!
run "$host_a" 1 & rank1=$!
run "$host_b" 2 & rank2=$!
failed=0
for pid in $rank0 $rank1 $rank2; do wait "$pid" || failed=1; done
for r in 0 1 2; do echo "--- rank $r"; tail -4 "$dir/rank$r.log"; done
exit $failed
