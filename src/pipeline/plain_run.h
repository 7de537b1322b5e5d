// Plain runs (docs/PIPELINE.md, "Plain runs"): where consecutive blocks of a point-to-point
// message all go plainly, their bytes travel as one transport message straight from the
// caller's buffer into the receiver's, so that UCX sees one large message and pipelines it
// itself (on cuda_ipc: one copy), instead of a rendezvous per pipeline block with at most a
// send window of blocks in flight. Each block keeps its envelope and its sequence.
#pragma once

#include <cstdint>

namespace ucclzip::pipeline {

// At most this many bytes go in one run (and fewer where the transport's block limit says so):
// a run is one sample of auto's plain rate and the decisions for its blocks are taken when it
// starts, so that a longer message still feeds the rates every so often. Messages of up to
// 1 GiB go as one run; a longer message's next run starts while the first is on its way
// (send_window.h), so that the cut leaves the link no idle gap.
inline constexpr uint64_t kMaxRunBytes = uint64_t{1} << 30;

struct PlainRun {
  uint32_t blocks = 1;  // the first block included
  uint64_t bytes = 0;
};

// Extends a run that starts with a plain block of `first_bytes` over the `candidates` blocks
// that follow it on the link, in order, while the run stays within `max_bytes` (the next
// block is not asked about once it would not fit) and `goes_plain(k)` (k = 1, 2, ...: the
// k-th block after the first) says the block goes plainly. `goes_plain` is asked once per
// block, in order, and at most once past the run's end (the block that stopped it, whose
// answer the caller keeps for that block), so that the compression policy's counters (bypass
// waits, probe intervals) advance exactly as when every block is decided on its own. A block
// the policy would send compressed, such as auto's probe, thus ends the run before it.
template <typename BlockBytes, typename GoesPlain>
PlainRun ExtendPlainRun(uint64_t first_bytes, uint32_t candidates, uint64_t max_bytes, BlockBytes block_bytes,
                        GoesPlain goes_plain) {
  PlainRun run{.blocks = 1, .bytes = first_bytes};
  for (uint32_t k = 1; k <= candidates; ++k) {
    const uint64_t next = block_bytes(k);
    if (run.bytes + next > max_bytes || !goes_plain(k)) break;
    run.bytes += next;
    ++run.blocks;
  }
  return run;
}

}  // namespace ucclzip::pipeline
