#include "pipeline/notices.h"

namespace ucclzip::pipeline {

Envelope CallNotice(const Schedule& schedule, DataType dtype, absl::StatusCode code, int failed_peer) {
  Envelope notice;
  notice.kind = BlockKind::kAbandoned;
  notice.dtype = dtype;
  notice.block_count = 1;
  notice.operation = schedule.kind;
  notice.operation_count = schedule.count;
  notice.root = schedule.root;
  notice.op = schedule.op;
  notice.collective_ordinal = schedule.ordinal;
  notice.abandoned_code = code;
  notice.failed_peer = failed_peer;
  return notice;
}

void SendNotices(TransportLanes& lanes, const Envelope& notice, std::vector<std::unique_ptr<SentNotice>>& sent,
                 const transport::CompletionCallback& on_complete) {
  for (int peer = 0; peer < lanes.size(); ++peer) {
    if (peer == lanes.rank()) continue;
    auto message = std::make_unique<SentNotice>();
    message->bytes = EncodeEnvelope(notice);
    message->request = lanes.ForSend().Send(
        peer, message->bytes.data(), message->bytes.size(), transport::MemoryType::kHost,
        transport::OpTag{notice.collective_ordinal & transport::kMaxSequence, kNoticeStream}, on_complete);
    sent.push_back(std::move(message));
  }
}

}  // namespace ucclzip::pipeline
