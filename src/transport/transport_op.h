// One posted send or receive as the progress thread sees it: the message cut into blocks, and
// where each block is (copy to staging, in UCX, copy back, done). Only the progress thread
// touches an Op; UCX callbacks (which run inside ucp_worker_progress on that thread) only
// record results in the block they belong to and list the op as having news
// (NoteNetworkDone), so that each pass of the thread looks only at ops that changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "transport/memory_type.h"
#include "transport/message_tag.h"
#include "transport/request.h"

namespace ucclzip::transport {

struct Op;

enum class BlockStage {
  kWaiting,      // not started
  kCopyIn,       // staged send: user buffer to staging block
  kNetwork,      // in UCX
  kNetworkDone,  // UCX finished; a staged receive still has to copy out
  kCopyOut,      // staged receive: staging block to user buffer
  kDone,
};

struct Block {
  Op* op = nullptr;
  uint32_t index = 0;
  size_t offset = 0;
  size_t bytes = 0;
  BlockStage stage = BlockStage::kWaiting;
  void* ucx_request = nullptr;
  uint8_t* staging = nullptr;
  uint32_t copy_ticket = 0;
  // Recorded by the UCX callback.
  absl::Status network_status;
  // A receive's block failed as too short while the sender's message goes on past it: the
  // sender's later blocks are drained (Transport::StartDrain).
  bool sender_continues = false;
};

enum class OpKind { kSend, kRecv };

struct Op {
  OpKind kind = OpKind::kSend;
  int rank = 0;
  int peer = 0;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  PointerInfo memory;
  bool staged = false;
  OpTag tag;
  std::shared_ptr<Request> request;
  std::vector<Block> blocks;
  uint32_t next_block = 0;  // staged path: the next block to start
  uint32_t blocks_done = 0;
  absl::Time deadline;  // pushed back whenever a block completes
  bool given_up = false;  // Transport::GiveUpRecv: at the deadline it is cancelled, not its peer failed
  // Transport::TakeStray's receive: what it may take, and where the tag it took goes.
  OpTag* stray_found = nullptr;
  StrayQuery stray;
  absl::Status error;
  absl::Time failed_at = absl::InfiniteFuture();

  // The progress thread's bookkeeping (transport_progress.cc, "Passes").
  // Blocks whose UCX callback ran since the thread last advanced the op, in callback order.
  std::vector<uint32_t> blocks_with_news;
  // The transport's list of ops with news, where the callbacks list this one; null once the op
  // has left the active ops (an abandoned op's late callbacks only record).
  std::vector<Op*>* news = nullptr;
  bool listed_in_news = false;
  bool polled = false;           // in the transport's list of staged ops polled every pass
  bool changed = false;          // in the transport's list of ops that may have finished
  uint32_t copies_in_flight = 0;  // staging copies
  std::list<std::unique_ptr<Op>>::iterator position;  // in the transport's active ops

  bool finished() const;  // done, or failed with nothing left in flight
  // From the UCX callbacks: `block` has left UCX (its network_status says how).
  void NoteNetworkDone(Block& block);
  // "rank 0: send to peer 1 (seq 7, stream 0, 1048576 bytes of host memory)"
  std::string Describe() const;
  // Records the first failure, phrased with this op's description.
  void Fail(const absl::Status& why);
};

// Splits `bytes` into blocks of `block_bytes` (at least one block, for empty messages too).
void CutIntoBlocks(Op& op, size_t block_bytes);

}  // namespace ucclzip::transport
