#!/usr/bin/env python3
"""Summarises the block timelines that UCCLZIP_LOG_LEVEL=debug prints (operation_task.cc's
TraceBlock) for the last operation of a name: per link, when each block's send started, when a
frame's encode finished, when the block landed at the receiver, when the receiver had decoded
or reduced it, and when the send completed, from the operation's first event on. The
name "sendrecv" takes the point-to-point calls ("send to peer N", "recv from peer N")."""
import collections
import datetime
import re
import sys

LINE = re.compile(r"\[ucclzip D (\S+ \S+) pid \d+ [^\]]*\] rank (\d+): operation (\d+) \((.+?)\) (send|recv) "
                  r"step (\d+) block (\d+) (?:to|from) peer (\d+) (started|encoded|landed|processed|done) at")


def matches(operation, name):
    return operation.startswith(("send to peer", "recv from peer")) if name == "sendrecv" else operation == name


def main(path, name):
    events = []
    for line in open(path, errors="replace"):
        m = LINE.search(line)
        if not m or not matches(m.group(4), name):
            continue
        when = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        events.append((when, int(m.group(2)), int(m.group(3)), m.group(5), int(m.group(6)), int(m.group(7)),
                       int(m.group(8)), m.group(9)))
    if not events:
        print(f"{path}: no block events of {name} (was UCCLZIP_LOG_LEVEL=debug set?)")
        return
    # Each rank's last of its largest operations of that name (the bench's own small exchanges
    # of its timings are allgathers too, a one-way send's acknowledgement a send); a collective
    # has the same number on every rank, a send and its receive need not.
    blocks = collections.defaultdict(collections.Counter)
    for e in events:
        blocks[e[1]][e[2]] += 1
    chosen = {}
    for rank, counts in blocks.items():
        largest = max(counts.values())
        chosen[rank] = max(n for n, count in counts.items() if count == largest)
    events = [e for e in events if e[2] == chosen[e[1]]]
    last = ", ".join(f"rank {r}: {n}" for r, n in sorted(chosen.items()))
    t0 = min(e[0] for e in events)
    links = collections.defaultdict(list)
    for when, rank, _, direction, step, block, peer, what in events:
        src, dst = (rank, peer) if direction == "send" else (peer, rank)
        links[(src, dst)].append((when - t0, direction, step, block, what))
    print(f"{path}: {name} (operations {last}), times in ms from its first event")
    for (src, dst), items in sorted(links.items()):
        start = {(s, b): t for t, d, s, b, w in items if d == "send" and w == "started"}
        done = {(s, b): t for t, d, s, b, w in items if d == "send" and w == "done"}
        landed = {(s, b): t for t, d, s, b, w in items if d == "recv" and w == "landed"}
        encoded = {(s, b): t for t, d, s, b, w in items if d == "send" and w == "encoded"}
        processed = {(s, b): t for t, d, s, b, w in items if d == "recv" and w == "processed"}
        keys = sorted(start, key=lambda k: start[k])
        if not keys:
            continue
        first, last_done = min(start.values()), max(done.values(), default=0)
        span = last_done - first
        # Sends on their way over time: how much of the span the link had none, and how many it
        # carried on average (a ring whose forwards wait for the block just sent carries one).
        changes = sorted([(start[k], 1) for k in keys if k in done] + [(done[k], -1) for k in keys if k in done])
        idle = weighted = 0.0
        in_flight, previous = 0, first
        for when, delta in changes:
            weighted += in_flight * (when - previous)
            idle += (when - previous) if in_flight == 0 else 0.0
            in_flight, previous = in_flight + delta, when
        mean = weighted / span if span > 0 else 0.0
        # Codec time on the link's path: the sender's encode on the GPU (launch to done, time
        # slices included; a host frame is encoded before its block starts) and the receiver's
        # decode or reduction after the block landed.
        encode = [encoded[k] - start[k] for k in keys if k in encoded]
        process = [processed[k] - landed[k] for k in keys if k in processed and k in landed]
        codec = "".join(f", {label} {sum(v) / len(v) * 1e3:.2f} ms a block on average ({len(v)} blocks)"
                        for label, v in (("encode", encode), ("decode/reduce", process)) if v)
        print(f"link {src}->{dst}: {len(keys)} blocks in {span * 1e3:.1f} ms, idle {idle * 1e3:.1f} ms, "
              f"{mean:.2f} blocks on their way on average{codec}")
        nan = float("nan")
        for k in keys:
            print(f"  step {k[0]} block {k[1]:3}: start {start[k] * 1e3:9.2f}  encoded {encoded.get(k, nan) * 1e3:9.2f}"
                  f"  landed {landed.get(k, nan) * 1e3:9.2f}  processed {processed.get(k, nan) * 1e3:9.2f}"
                  f"  done {done.get(k, nan) * 1e3:9.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: trace_summary.py LOG OPERATION (broadcast, allgather, ...)")
    main(sys.argv[1], sys.argv[2])
