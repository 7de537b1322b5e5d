#include "transport/bootstrap.h"

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "transport/bootstrap_wire.h"
#include "transport/status_context.h"
#include "transport/wire_bytes.h"

namespace ucclzip::transport {
namespace {
// A peer that floods us with messages nobody asked for is broken; stop buffering. Bounded by
// bytes as well as by count: 4096 frames of the frame limit would be 256 GiB.
constexpr size_t kMaxUnexpectedFrames = 4096;
constexpr uint64_t kMaxUnexpectedBytes = 4 * kMaxFrameBytes;
// An allgather's frames, both ways, are a verdict (its code and an empty message when OK) and
// then entries (a contribution, or the result's), each with its length before it.
constexpr uint64_t kAllGatherFrameOverhead = 2 * sizeof(uint32_t);
constexpr uint64_t kAllGatherEntryOverhead = sizeof(uint32_t);

// Entries follow only an OK verdict.
std::string EncodeAllGatherFrame(const absl::Status& verdict, absl::Span<const absl::string_view> entries) {
  WireWriter writer;
  WriteVerdict(writer, verdict);
  if (verdict.ok()) {
    for (absl::string_view entry : entries) writer.String(entry);
  }
  return writer.bytes();
}

// The frame's verdict, with `entries` filled where it is OK; DataLoss for a malformed frame.
absl::Status DecodeAllGatherFrame(absl::string_view frame, absl::Span<std::string> entries) {
  WireReader reader(frame);
  absl::Status verdict;
  if (!ReadVerdict(reader, &verdict)) return absl::DataLossError("malformed bootstrap allgather frame");
  if (!verdict.ok()) return verdict;
  for (std::string& entry : entries) {
    if (!reader.String(&entry, kMaxFrameBytes)) return absl::DataLossError("malformed bootstrap allgather frame");
  }
  if (!reader.at_end()) return absl::DataLossError("malformed bootstrap allgather frame");
  return absl::OkStatus();
}
}  // namespace

Bootstrap::Bootstrap(int rank, std::vector<Socket> peers)
    : rank_(rank),
      size_(static_cast<int>(peers.size())),
      peers_(std::move(peers)),
      broken_(size_),
      unexpected_(size_),
      unexpected_bytes_(size_, 0) {}

absl::Status Bootstrap::SendTo(int peer, uint64_t tag, absl::string_view payload, absl::Time deadline) {
  if (!broken_[peer].ok()) return broken_[peer];
  bool began = false;
  absl::Status sent = SendFrame(peers_[peer], tag, payload, deadline, &began);
  if (!sent.ok() && began) {
    broken_[peer] = absl::FailedPreconditionError(absl::StrCat(
        "the connection to rank ", peer, " broke off in the middle of a message (", sent.message(),
        "): it takes no further message"));
  }
  return sent;
}

absl::StatusOr<Frame> Bootstrap::RecvFrom(int peer, absl::Time deadline) {
  if (!broken_[peer].ok()) return broken_[peer];
  bool began = false;
  absl::StatusOr<Frame> frame = RecvFrame(peers_[peer], deadline, &began);
  if (!frame.ok() && began) {
    broken_[peer] = absl::FailedPreconditionError(absl::StrCat(
        "the connection from rank ", peer, " broke off in the middle of a message (", frame.status().message(),
        "): nothing more is read from it"));
  }
  return frame;
}

absl::Status Bootstrap::CheckPeer(int peer, absl::string_view operation) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": bootstrap ", operation, " with invalid peer ", peer, " (world size ", size_, ")"));
  }
  return absl::OkStatus();
}

absl::Status Bootstrap::Send(int peer, uint64_t tag, absl::string_view bytes, absl::Time deadline) {
  if (absl::Status s = CheckPeer(peer, "send"); !s.ok()) return s;
  auto context = absl::StrCat("rank ", rank_, ": bootstrap send of ", bytes.size(), " bytes (tag ", tag, ") to rank ", peer);
  if (tag & kReservedTagBit) return absl::InvalidArgumentError(absl::StrCat(context, ": the tag's top bit is reserved"));
  if (bytes.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": larger than the bootstrap limit of ", kMaxFrameBytes));
  }
  return WithContext(SendTo(peer, tag, bytes, deadline), context);
}

absl::StatusOr<std::string> Bootstrap::Recv(int peer, uint64_t tag, absl::Time deadline) {
  if (absl::Status s = CheckPeer(peer, "receive"); !s.ok()) return s;
  if (tag & kReservedTagBit) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": bootstrap receive from rank ", peer, " with tag ",
                                                   tag, ": the tag's top bit is reserved"));
  }
  return RecvTagged(peer, tag, deadline);
}

absl::StatusOr<std::string> Bootstrap::RecvTagged(int peer, uint64_t tag, absl::Time deadline) {
  auto& waiting = unexpected_[peer];
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    if (it->first == tag) {
      std::string payload = std::move(it->second);
      unexpected_bytes_[peer] -= payload.size();
      waiting.erase(it);
      return payload;
    }
  }
  auto context = absl::StrCat("rank ", rank_, ": bootstrap receive (tag ", tag, ") from rank ", peer);
  while (true) {
    absl::StatusOr<Frame> frame = RecvFrom(peer, deadline);
    if (!frame.ok()) return WithContext(frame.status(), context);
    if (frame->tag == kAbortTag) return WithContext(DecodeAbort(frame->payload), context);
    if (frame->tag == tag) return std::move(frame->payload);
    if (waiting.size() >= kMaxUnexpectedFrames ||
        unexpected_bytes_[peer] + frame->payload.size() > kMaxUnexpectedBytes) {
      // The message is dropped: a later receive of its tag would wait for it in vain, so the
      // connection takes no further message, and every call on it says why.
      broken_[peer] = absl::ResourceExhaustedError(absl::StrCat(
          "rank ", peer, " sent more than this rank buffers of messages nobody asked for (", waiting.size(),
          " messages, ", unexpected_bytes_[peer], " bytes, then a message of ", frame->payload.size(),
          " bytes with tag ", frame->tag, "; limits ", kMaxUnexpectedFrames, " messages and ", kMaxUnexpectedBytes,
          " bytes)"));
      return WithContext(broken_[peer], context);
    }
    unexpected_bytes_[peer] += frame->payload.size();
    waiting.emplace_back(frame->tag, std::move(frame->payload));
  }
}

void Bootstrap::BroadcastAbort(const absl::Status& why) {
  std::string payload = EncodeVerdict(why);
  absl::Time deadline = absl::Now() + absl::Seconds(1);
  for (int peer = 1; peer < size_; ++peer) {
    // Best effort: a peer that is gone cannot be told, and the caller already has the error.
    SendTo(peer, kAbortTag, payload, deadline).IgnoreError();
  }
}

absl::StatusOr<std::vector<std::string>> Bootstrap::AllGather(absl::string_view mine, absl::Time deadline) {
  const uint64_t tag = kCollectiveTagBase | collective_sequence_++;
  // Every rank sends rank 0 exactly one frame under the collective's tag and gets exactly one
  // back, whatever is refused: a refusal travels in place of a contribution, and rank 0's
  // verdict before the result, so that no frame is left behind for a later collective to read.
  // Only a failed connection ends a collective with an abort (the bootstrap is then broken).
  const uint64_t room = kMaxFrameBytes - kAllGatherFrameOverhead - kAllGatherEntryOverhead * size_;
  absl::Status refused;
  if (mine.size() > room) {
    refused = absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": bootstrap allgather contribution of ",
                                                      mine.size(), " bytes exceeds the limit of ", room,
                                                      " bytes for a world of ", size_));
  }
  std::vector<std::string> all(size_);
  if (rank_ != 0) {
    if (absl::Status s = SendTo(0, tag, EncodeAllGatherFrame(refused, {mine}), deadline); !s.ok()) {
      return WithContext(s, absl::StrCat("rank ", rank_, ": allgather, sending to rank 0"));
    }
    absl::StatusOr<std::string> gathered = RecvTagged(0, tag, deadline);
    if (!refused.ok()) return refused;  // its own reason, whatever rank 0 answered
    if (!gathered.ok()) return gathered.status();
    absl::Status verdict = DecodeAllGatherFrame(*gathered, absl::MakeSpan(all));
    if (!verdict.ok()) return WithContext(verdict, absl::StrCat("rank ", rank_, ": allgather result from rank 0"));
    return all;
  }
  absl::Status failure = refused;
  all[0] = std::string(mine);
  for (int peer = 1; peer < size_; ++peer) {
    absl::StatusOr<std::string> part = RecvTagged(peer, tag, deadline);
    if (!part.ok()) {
      absl::Status failed = WithContext(part.status(), absl::StrCat("allgather: rank ", peer, " did not contribute"));
      BroadcastAbort(failed);
      return failed;
    }
    failure.Update(DecodeAllGatherFrame(*part, absl::MakeSpan(&all[peer], 1)));
  }
  uint64_t result_bytes = kAllGatherFrameOverhead;
  for (const std::string& entry : all) result_bytes += kAllGatherEntryOverhead + entry.size();
  if (failure.ok() && result_bytes > kMaxFrameBytes) {
    failure = absl::InvalidArgumentError(absl::StrCat("rank 0: bootstrap allgather result of ", result_bytes,
                                                      " bytes from ", size_, " ranks exceeds the limit of ",
                                                      kMaxFrameBytes, " bytes"));
  }
  const std::string result = EncodeAllGatherFrame(failure, std::vector<absl::string_view>(all.begin(), all.end()));
  for (int peer = 1; peer < size_; ++peer) {
    if (absl::Status s = SendTo(peer, tag, result, deadline); !s.ok()) {
      absl::Status failed = WithContext(s, absl::StrCat("rank 0: allgather, sending the result to rank ", peer));
      BroadcastAbort(failed);
      return failed;
    }
  }
  if (!failure.ok()) return failure;
  return all;
}

absl::Status Bootstrap::Barrier(absl::Time deadline) { return AllGather("", deadline).status(); }

}  // namespace ucclzip::transport
