#include "transport/transport_op.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

bool Op::finished() const {
  if (blocks_done == blocks.size()) return true;
  if (error.ok()) return false;
  return std::all_of(blocks.begin(), blocks.end(),
                     [](const Block& b) { return b.stage == BlockStage::kWaiting || b.stage == BlockStage::kDone; });
}

void Op::NoteNetworkDone(Block& block) {
  block.stage = BlockStage::kNetworkDone;
  block.ucx_request = nullptr;
  blocks_with_news.push_back(block.index);
  if (news != nullptr && !listed_in_news) {
    listed_in_news = true;
    news->push_back(this);
  }
}

std::string Op::Describe() const {
  return absl::StrCat("rank ", rank, ": ", kind == OpKind::kSend ? "send to" : "recv from", " peer ", peer, " (seq ",
                      tag.sequence, ", stream ", tag.stream, ", ", bytes, " bytes of ", MemoryTypeName(memory.type),
                      " memory", staged ? ", staged" : "", ")");
}

void Op::Fail(const absl::Status& why) {
  if (!error.ok()) return;
  error = absl::Status(why.code(), absl::StrCat(Describe(), ": ", why.message()));
  failed_at = absl::Now();
}

void CutIntoBlocks(Op& op, size_t block_bytes) {
  size_t count = std::max<size_t>(1, (op.bytes + block_bytes - 1) / block_bytes);
  op.blocks.resize(count);
  for (size_t i = 0; i < count; ++i) {
    Block& block = op.blocks[i];
    block.op = &op;
    block.index = static_cast<uint32_t>(i);
    block.offset = i * block_bytes;
    block.bytes = std::min(block_bytes, op.bytes - block.offset);
  }
}

}  // namespace ucclzip::transport
