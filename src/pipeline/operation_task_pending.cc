// What an operation's unfinished blocks were doing when it failed for lack of progress: on
// every rank, the error then says what that rank waited for, so that a deadlock (every rank
// waiting on a receive, no send started) tells itself apart from a lost message or a stalled
// GPU (the input never became ready) without a debugger.
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {
namespace {

// How many blocks of one link share a stage, and the first of them.
struct StageCount {
  int blocks = 0;
  int first_step = 0;
  uint32_t first_block = 0;
};

// Keyed by direction (sends first), peer and stage, in the order of the pipeline's stages, then
// what the blocks wait for (which the stage determines).
enum Direction { kSendTo, kReceiveFrom };
using PendingKey = std::tuple<Direction, int, int, const char*>;

void Count(std::map<PendingKey, StageCount>& pending, PendingKey key, int step, uint32_t block) {
  StageCount& count = pending[key];
  if (count.blocks++ == 0) {
    count.first_step = step;
    count.first_block = block;
  }
}

}  // namespace

std::string OperationTask::PendingBlocks() const {
  std::map<PendingKey, StageCount> pending;
  for (const SendBlock& block : send_blocks_) {
    const int peer = spec_.schedule.sends[block.step].peer;
    switch (block.stage) {
      case SendStage::kWaiting:
        if (!SourceReady(block)) {
          Count(pending, {kSendTo, peer, 0, "waiting for the block they send to arrive or be reduced"}, block.step,
                block.index);
        } else {
          Count(pending, {kSendTo, peer, 1, "ready, not started (link order, send window or slot)"}, block.step,
                block.index);
        }
        break;
      case SendStage::kEncoding: Count(pending, {kSendTo, peer, 2, "encoding"}, block.step, block.index); break;
      case SendStage::kSending: Count(pending, {kSendTo, peer, 3, "sent, not completed"}, block.step, block.index); break;
      case SendStage::kDone: break;
    }
  }
  for (const RecvBlock& block : recv_blocks_) {
    const int peer = spec_.schedule.recvs[block.step].peer;
    const char* what = nullptr;
    int order = 0;
    switch (block.stage) {
      case RecvStage::kEnvelope: what = "waiting for the envelope", order = 0; break;
      case RecvStage::kParts: what = "envelope in, waiting for a slot or place to post the rest", order = 1; break;
      case RecvStage::kHead: what = "waiting for the frame's head", order = 2; break;
      case RecvStage::kReceiving: what = "receiving", order = 3; break;
      case RecvStage::kProcessing: what = "decoding or reducing", order = 4; break;
      case RecvStage::kDone: break;
    }
    if (what != nullptr) Count(pending, {kReceiveFrom, peer, order, what}, block.step, block.index);
  }
  std::vector<std::string> lines;
  if (spec_.input_ready != nullptr && !input_seen_ready_) {
    lines.push_back("the input was not ready (the caller's stream had not reached the call)");
  }
  // An error message, not a dump: a task with many peers names the first groups and counts the rest.
  constexpr size_t kMostGroups = 8;
  size_t groups = 0;
  for (const auto& [key, count] : pending) {
    if (groups++ == kMostGroups) {
      lines.push_back(absl::StrCat("and ", pending.size() - kMostGroups, " more groups"));
      break;
    }
    const auto& [direction, peer, order, what] = key;
    lines.push_back(absl::StrCat(direction == kSendTo ? "send to" : "receive from", " peer ", peer, ": ", count.blocks,
                                 count.blocks == 1 ? " block " : " blocks ", what, " (first: step ", count.first_step,
                                 " block ", count.first_block, ")"));
  }
  if (lines.empty()) return "no block was pending";
  return absl::StrJoin(lines, "; ");
}

}  // namespace ucclzip::pipeline
