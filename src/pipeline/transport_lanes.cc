#include "pipeline/transport_lanes.h"

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {

absl::StatusOr<std::unique_ptr<TransportLanes>> TransportLanes::Create(transport::Bootstrap& bootstrap,
                                                                       const transport::TransportOptions& options) {
  if (options.transport_lanes < 1 || options.transport_lanes > kMaxLanes) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", bootstrap.rank(), ": transport_lanes is ",
                                                   options.transport_lanes, "; it must be 1 to ", kMaxLanes));
  }
  std::vector<std::unique_ptr<transport::Transport>> lanes;
  for (int lane = 0; lane < options.transport_lanes; ++lane) {
    absl::StatusOr<std::unique_ptr<transport::Transport>> created = transport::Transport::Create(bootstrap, options);
    if (!created.ok()) {
      if (options.transport_lanes == 1) return created.status();
      return absl::Status(created.status().code(), absl::StrCat("lane ", lane, " of ", options.transport_lanes, ": ",
                                                                created.status().message()));
    }
    if (!lanes.empty() && (*created)->device_memory_direct() != lanes[0]->device_memory_direct()) {
      return absl::InternalError(absl::StrCat("rank ", bootstrap.rank(), ": lane ", lane,
                                              " disagrees with lane 0 on whether UCX takes device memory"));
    }
    lanes.push_back(std::move(*created));
  }
  auto all = std::unique_ptr<TransportLanes>(new TransportLanes(std::move(lanes)));
  if (all->lanes_.size() > 1) {
    for (auto& lane : all->lanes_) {
      lane->SetPeerFailureListener([all = all.get(), from = lane.get()](int peer, const absl::Status& why) {
        for (auto& other : all->lanes_) {
          if (other.get() != from) other->ReportPeerFailure(peer, why);
        }
      });
    }
  }
  return all;
}

TransportLanes::~TransportLanes() { Shutdown(); }

absl::Status TransportLanes::PrepareDeviceStaging(int device) {
  for (auto& lane : lanes_) {
    if (absl::Status s = lane->PrepareDeviceStaging(device); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TransportLanes::FirstPeerFailure() {
  for (auto& lane : lanes_) {
    if (absl::Status s = lane->FirstPeerFailure(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

int TransportLanes::FirstFailedPeer() {
  for (auto& lane : lanes_) {
    if (const int peer = lane->FirstFailedPeer(); peer >= 0) return peer;
  }
  return -1;
}

void TransportLanes::Abort(const absl::Status& why) {
  for (auto& lane : lanes_) lane->Abort(why);
}

void TransportLanes::Shutdown() {
  for (auto& lane : lanes_) lane->Shutdown();
}

}  // namespace ucclzip::pipeline
