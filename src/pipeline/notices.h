// Notices: what a collective call that failed tells every peer, so that a peer waiting for what
// this rank will never send learns of it (a tree's root for the answers of its leaves, one end
// of a cycle of ranks that each wait for the other). A notice is the call as an abandoned
// envelope, on kNoticeStream with the call's ordinal as its sequence (modulo 2^20), which
// nothing takes but the looks of a waiting collective (operation_task_strays.cc): each call's
// own. One whose call its recipient has already left stays unread in UCX's unexpected queue
// (88 bytes) until a look of a later call of that rank, once no earlier call is running there,
// drops it.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "pipeline/envelope.h"
#include "pipeline/schedule.h"
#include "pipeline/transport_lanes.h"
#include "transport/request.h"

namespace ucclzip::pipeline {

inline constexpr uint32_t kNoticeStream = 4;

// A notice on its way: its bytes stay here until the transport is done with them.
struct SentNotice {
  std::array<uint8_t, kEnvelopeBytes> bytes{};
  std::shared_ptr<transport::Request> request;
};

// The notice of `schedule`'s call (its ordinal included), which failed with `code`, naming the
// first peer this rank saw fail (-1: none).
Envelope CallNotice(const Schedule& schedule, DataType dtype, absl::StatusCode code, int failed_peer);

// Sends `notice` to every other rank and keeps each message in `sent`.
void SendNotices(TransportLanes& lanes, const Envelope& notice, std::vector<std::unique_ptr<SentNotice>>& sent,
                 const transport::CompletionCallback& on_complete);

}  // namespace ucclzip::pipeline
