// The Communicator: the bootstrap, the transport lanes on top of it, and the pipeline engine that
// runs every operation. It lives in the pipeline layer because it joins all of them; the
// operations themselves (Send, Recv and the collectives) build their schedules in
// src/collectives and come here through Submit.
#include <algorithm>
#include <atomic>
#include <map>

#include "absl/strings/str_cat.h"
#include "logging/logging.h"
#include "pipeline/engine.h"
#include "pipeline/options_environment.h"
#include "pipeline/self_transfers.h"
#include "transport/communicator_access.h"
#include "transport/message_tag.h"
#include "transport/socket.h"
#include "transport/wire_bytes.h"

namespace ucclzip {
namespace {

// The bootstrap adopts an inherited listening socket (BootstrapConfig::listen_fd) whatever
// happens; an exit before it closes the socket too, or its port would stay bound.
absl::Status ExitBeforeBootstrap(const BootstrapConfig& bootstrap, absl::Status why) {
  if (bootstrap.listen_fd >= 0) transport::Socket adopted(bootstrap.listen_fd);
  return why;
}

std::string OptionsSummary(const pipeline::TransportLanes& lanes) {
  const transport::TransportOptions& o = lanes.options();
  const char* compression = o.compression == CompressionMode::kAuto ? "auto"
                            : o.compression == CompressionMode::kOn ? "on"
                                                                     : "off";
  return absl::StrCat("UCX transports ", o.ucx_transports.empty() ? "UCX's choice" : o.ucx_transports, ", device memory ",
                      lanes.device_memory_direct() ? "direct" : "staged",
                      o.staging_copy_wakeups ? " (copies wake the progress thread)" : "",
                      !lanes.device_memory_direct() && o.forward_from_host ? ", forwarded from the host" : "",
                      ", transport lanes ",
                      o.transport_lanes, ", compression ", compression,
                      ", pipeline blocks ", o.min_pipeline_block_bytes, " to ", o.pipeline_block_bytes,
                      " B, allreduce by recursive doubling up to ", o.recursive_doubling_bytes,
                      " B, broadcast down a tree up to ", o.tree_broadcast_bytes,
                      " B, transport blocks ", *o.block_bytes, " B, op timeout ", absl::FormatDuration(o.op_timeout));
}

// Both ends of every link cut an operation into blocks by the first two sizes, and every rank
// of an allreduce or a broadcast picks its algorithm by the others, so they must agree: a rank
// that differs fails here, naming both values, instead of at its first message.
absl::Status CheckSharedOptionsAgree(transport::Bootstrap& bootstrap, const CommunicatorOptions& options) {
  const std::pair<const char*, uint64_t> mine[] = {{"pipeline_block_bytes", options.pipeline_block_bytes},
                                                   {"min_pipeline_block_bytes", options.min_pipeline_block_bytes},
                                                   {"recursive_doubling_bytes", options.recursive_doubling_bytes},
                                                   {"tree_broadcast_bytes", options.tree_broadcast_bytes}};
  transport::WireWriter record;
  for (const auto& [name, value] : mine) record.U64(value);
  absl::StatusOr<std::vector<std::string>> all = bootstrap.AllGather(record.bytes(), absl::Now() + options.op_timeout);
  if (!all.ok()) {
    return absl::Status(all.status().code(), absl::StrCat("rank ", bootstrap.rank(), ": exchanging the options every rank "
                                                          "must share: ", all.status().message()));
  }
  for (size_t r = 0; r < all->size(); ++r) {
    transport::WireReader reader((*all)[r]);
    for (const auto& [name, value] : mine) {
      uint64_t theirs = 0;
      if (!reader.U64(&theirs)) {
        return absl::DataLossError(absl::StrCat("rank ", bootstrap.rank(), ": malformed shared options from rank ", r));
      }
      if (theirs != value) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", bootstrap.rank(), ": ", name, " ", value,
                                                       " differs from rank ", r, "'s ", theirs,
                                                       "; every rank must use the same"));
      }
    }
  }
  return absl::OkStatus();
}

std::string StatsSummary(const CommunicatorStats& s) {
  return absl::StrCat("sent ", s.messages_sent, " messages (", s.payload_bytes_sent, " B as ", s.wire_bytes_sent,
                      " B on the wire), received ", s.messages_received, " (", s.payload_bytes_received, " B)");
}

// This thread's key to its open groups: unique over the process's life, where a std::thread::id
// is not: a thread that exited inside a group left it open, and a later thread given the same
// id inherited it, its calls then queued for a GroupEnd that never came.
uint64_t ThreadToken() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

}  // namespace

namespace internal {
// An open group, as the Operations of its queued calls see it: which thread opened it, and
// whether it is still open (Operation::Wait).
struct OpenGroupMark {
  explicit OpenGroupMark(uint64_t opened_by) : thread(opened_by) {}
  const uint64_t thread;
  std::atomic<bool> open{true};
};
}  // namespace internal

struct Communicator::Impl {
  std::unique_ptr<transport::Bootstrap> bootstrap;
  std::unique_ptr<pipeline::TransportLanes> lanes;
  std::unique_ptr<pipeline::Engine> engine;
  // Open groups, per thread: how deep the GroupStarts nest, and the calls queued since the
  // outermost one.
  struct OpenGroup {
    int depth = 0;
    std::shared_ptr<internal::OpenGroupMark> mark;  // made by the outermost GroupStart
    std::vector<pipeline::OperationSpec> calls;
    // Calls refused at once, whose schedule could not be told (Communicator::Refused): they
    // take no places, but GroupEnd's Operation covers them too.
    std::vector<std::shared_ptr<transport::Request>> refused;
    // Those of them refused before they took their places on their links: they are counted at
    // GroupEnd among `calls`, where they were called.
    std::vector<pipeline::Engine::UnplacedCall> unplaced;
  };
  absl::Mutex group_mutex;
  std::map<uint64_t, OpenGroup> groups ABSL_GUARDED_BY(group_mutex);  // by ThreadToken()
  // Set by Abort: the destruction then does not wait for the other ranks.
  std::atomic<bool> aborted{false};
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const CommunicatorConfig& config) {
  absl::StatusOr<CommunicatorOptions> effective = pipeline::WithEnvironmentDefaults(config.options, config.bootstrap.rank);
  if (!effective.ok()) return ExitBeforeBootstrap(config.bootstrap, effective.status());
  transport::TransportOptions options;
  static_cast<CommunicatorOptions&>(options) = *effective;
  return internal::CommunicatorAccess::Create(config.bootstrap, options);
}

Communicator::~Communicator() {
  // Calls left in a group that never ended were never posted: their Operations fail now rather
  // than wait for ever.
  std::vector<pipeline::Engine::UnplacedCall> unplaced;
  {
    absl::MutexLock lock(&impl_->group_mutex);
    for (auto& [thread, group] : impl_->groups) {
      pipeline::Engine::Discard(std::move(group.calls),
                                absl::CancelledError("the communicator was destroyed while the call's group was open "
                                                     "(GroupStart without GroupEnd)"));
      unplaced.insert(unplaced.end(), std::make_move_iterator(group.unplaced.begin()),
                      std::make_move_iterator(group.unplaced.end()));
    }
    impl_->groups.clear();
  }
  // Their calls refused before they took their places are told all the same, as outside a group:
  // a peer's matching call then fails at its next look, not when this rank's transport ends.
  if (!unplaced.empty()) impl_->engine->Submit({}, std::move(unplaced));
  // The barrier makes sure every rank has finished with the others (every completed send
  // delivered) before the endpoints are closed; if a peer is gone it fails fast or times out.
  // An aborted communicator delivers nothing more and leaves at once, as NCCL's abort does: its
  // peers' calls fail, and their barriers fail fast once its bootstrap closes (waiting for busy
  // peers here made an abort take the whole shutdown timeout, 10 s by default).
  if (impl_->aborted.load(std::memory_order_acquire)) {
    UCCLZIP_LOG(kInfo) << "rank " << rank() << ": aborted; closing without waiting for the other ranks";
  } else if (absl::Status s = impl_->bootstrap->Barrier(absl::Now() + impl_->lanes->options().shutdown_timeout);
             !s.ok()) {
    UCCLZIP_LOG(kWarning) << "rank " << rank() << ": closing without the other ranks: " << s;
  }
  UCCLZIP_LOG(kInfo) << "rank " << rank() << ": communicator destroyed; " << StatsSummary(stats());
  impl_->lanes->Shutdown();
  // A drain that ran out of time (a send UCX had begun to a peer that is gone) leaves transport
  // requests that complete only when their transport is destroyed, after its UCX worker: the
  // engine, whose tasks wait on them, stops without them (its thread joined with them pending
  // hung this destructor for ever), the transports go, completing them, and then the engine
  // fails its callers' Operations of those tasks. Stop lets go of the callers' streams those
  // tasks held first: the transports' destruction frees pinned memory, which may wait for the
  // device to idle, and a held stream kept it busy for ever.
  impl_->engine->Stop();
  impl_->lanes.reset();
  impl_->engine.reset();
}

const CommunicatorOptions& Communicator::options() const { return impl_->lanes->options(); }
int Communicator::rank() const { return impl_->lanes->rank(); }
int Communicator::size() const { return impl_->lanes->size(); }
bool Communicator::device_memory_direct() const { return impl_->lanes->device_memory_direct(); }

void Communicator::Abort() {
  impl_->aborted.store(true, std::memory_order_release);
  const absl::Status why = absl::AbortedError(absl::StrCat("rank ", rank(), " called Abort"));
  impl_->lanes->Abort(why);
  impl_->engine->Abort(why);
}

Operation Communicator::Failed(const absl::Status& status) {
  auto failed = std::make_shared<transport::Request>();
  failed->Complete(status);
  return Operation({failed});
}

Operation Communicator::Refused(const absl::Status& status) {
  auto failed = std::make_shared<transport::Request>();
  failed->Complete(status);
  {
    absl::MutexLock lock(&impl_->group_mutex);
    auto group = impl_->groups.find(ThreadToken());
    if (group != impl_->groups.end()) group->second.refused.push_back(failed);
  }
  return Operation({failed});
}

Operation Communicator::RefusedUnplaced(const pipeline::Call& call, const absl::Status& status,
                                        const std::vector<int>& peers) {
  pipeline::Engine::UnplacedCall unplaced{.peers = peers, .call = call};
  if (unplaced.call.refused.ok()) unplaced.call.refused = status;
  bool in_group = false;
  {
    absl::MutexLock lock(&impl_->group_mutex);
    auto group = impl_->groups.find(ThreadToken());
    if (group != impl_->groups.end()) {
      in_group = true;
      const std::vector<pipeline::OperationSpec>& calls = group->second.calls;
      unplaced.calls_before = std::count_if(calls.begin(), calls.end(), [&](const pipeline::OperationSpec& spec) {
        return !pipeline::IsOrWasSelfTransfer(spec, rank());
      });
      group->second.unplaced.push_back(std::move(unplaced));
    }
  }
  if (!in_group) impl_->engine->Submit({}, {std::move(unplaced)});
  return Refused(status);
}

std::vector<int> Communicator::OtherRanks() const {
  std::vector<int> others;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank()) others.push_back(peer);
  }
  return others;
}

Operation Communicator::RefusedUnplacedCollective(const pipeline::Call& call) {
  return RefusedUnplaced(call, call.refused, OtherRanks());
}

Operation Communicator::Submit(pipeline::Call call) {
  absl::StatusOr<pipeline::OperationSpec> spec = impl_->engine->Prepare(call);
  // A call the engine's checks refuse on this rank takes its places on its links all the same
  // (pipeline::Call::refused), where they can be told.
  if (!spec.ok() && call.refused.ok()) {
    call.refused = spec.status();
    spec = impl_->engine->Prepare(call);
  }
  if (!spec.ok()) {
    // Not even its places could be taken: the links its steps name count it.
    std::vector<int> peers;
    auto note = [&](int peer) {
      if (peer >= 0 && peer < size() && peer != rank() && std::find(peers.begin(), peers.end(), peer) == peers.end()) {
        peers.push_back(peer);
      }
    };
    for (const pipeline::SendStep& step : call.schedule.sends) note(step.peer);
    for (const pipeline::RecvStep& step : call.schedule.recvs) note(step.peer);
    return RefusedUnplaced(call, call.refused.ok() ? spec.status() : call.refused, peers);
  }
  std::shared_ptr<transport::Request> request = spec->request;
  {
    absl::MutexLock lock(&impl_->group_mutex);
    auto group = impl_->groups.find(ThreadToken());
    if (group != impl_->groups.end()) {
      // A refused call fails at once, in a group too (its queued places complete only at
      // GroupEnd, whose Operation covers them): its own Operation is a failed one.
      const absl::Status refused = spec->refused;
      group->second.calls.push_back(std::move(*spec));
      if (!refused.ok()) return Failed(refused);
      return Operation({request}, group->second.mark);
    }
  }
  std::vector<pipeline::OperationSpec> one;
  one.push_back(std::move(*spec));
  if (pipeline::IsSelfTransfer(one.front(), rank())) {
    pipeline::Engine::Discard(std::move(one),
                              absl::InvalidArgumentError("a transfer to this rank itself must be in a group "
                                                         "(GroupStart/GroupEnd) with its matching Send or Recv, "
                                                         "which it becomes a copy with, as in NCCL"));
    return Operation({request});
  }
  impl_->engine->Submit(std::move(one));
  return Operation({request});
}

void Communicator::GroupStart() {
  absl::MutexLock lock(&impl_->group_mutex);
  Impl::OpenGroup& group = impl_->groups[ThreadToken()];
  if (group.depth++ == 0) group.mark = std::make_shared<internal::OpenGroupMark>(ThreadToken());
}

Operation Communicator::GroupEnd() {
  std::vector<pipeline::OperationSpec> specs;
  std::vector<std::shared_ptr<transport::Request>> requests;
  std::vector<pipeline::Engine::UnplacedCall> unplaced;
  {
    absl::MutexLock lock(&impl_->group_mutex);
    auto group = impl_->groups.find(ThreadToken());
    if (group == impl_->groups.end()) {
      return Failed(absl::FailedPreconditionError(
          absl::StrCat("rank ", rank(), ": GroupEnd without a GroupStart on this thread")));
    }
    // As in NCCL, only the outermost GroupEnd posts the calls; an inner one has nothing to wait for.
    if (--group->second.depth > 0) return Operation();
    specs = std::move(group->second.calls);
    requests = std::move(group->second.refused);
    unplaced = std::move(group->second.unplaced);
    group->second.mark->open.store(false, std::memory_order_release);
    impl_->groups.erase(group);
  }
  for (const pipeline::OperationSpec& spec : specs) requests.push_back(spec.request);
  pipeline::PairSelfTransfers(specs, rank());
  impl_->engine->Submit(std::move(specs), std::move(unplaced));
  return Operation(std::move(requests));
}

CommunicatorStats Communicator::stats() const { return impl_->engine->stats(); }

bool Operation::Test() const {
  for (const auto& part : parts_) {
    if (!part->Test()) return false;
  }
  return true;
}

absl::Status Operation::Wait(absl::Duration timeout) const {
  // A wait of no time is a poll, and says DeadlineExceeded as for any pending call.
  if (timeout > absl::ZeroDuration() && group_ != nullptr && group_->open.load(std::memory_order_acquire) &&
      group_->thread == ThreadToken() && !Test()) {
    return absl::FailedPreconditionError(absl::StrCat(
        parts_.front()->what(), ": queued in a group that this thread has opened (GroupStart) and not ended: it starts "
        "only at that GroupEnd, so waiting for it first would wait for ever"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status first;
  for (const auto& part : parts_) first.Update(part->Wait(deadline));
  return first;
}

namespace internal {

transport::Transport& CommunicatorAccess::TransportOf(Communicator& communicator) {
  return *communicator.impl_->lanes->All()[0];
}

std::vector<transport::Transport*> CommunicatorAccess::LanesOf(Communicator& communicator) {
  std::vector<transport::Transport*> lanes;
  for (const auto& lane : communicator.impl_->lanes->All()) lanes.push_back(lane.get());
  return lanes;
}

transport::Bootstrap& CommunicatorAccess::BootstrapOf(Communicator& communicator) {
  return *communicator.impl_->bootstrap;
}

void CommunicatorAccess::StartSequencesAt(Communicator& communicator, uint32_t first) {
  communicator.impl_->engine->StartSequencesAt(first);
}

absl::StatusOr<std::unique_ptr<Communicator>> CommunicatorAccess::Create(const BootstrapConfig& bootstrap,
                                                                         const transport::TransportOptions& options) {
  auto impl = std::make_unique<Communicator::Impl>();
  // The transport holds at most kMaxRanks; the bootstrap, which takes more, would otherwise
  // gather them all (or wait its whole timeout for ranks never started) before that is found.
  if (bootstrap.world_size > transport::kMaxRanks) {
    return ExitBeforeBootstrap(bootstrap, absl::InvalidArgumentError(absl::StrCat(
                                              "rank ", bootstrap.rank, ": world size ", bootstrap.world_size,
                                              " exceeds the ", transport::kMaxRanks, " ranks a communicator holds")));
  }
  // This rank's own resources first: a rank that fails on them then fails before it has joined
  // the others, not while they still connect to it (they then see its bootstrap fail, naming it).
  // A block holds at least one element (PipelineBlockElements), and slots and scratch are
  // sized by these bytes: below the widest element a block would outgrow them.
  constexpr size_t kWidestElement = ElementSize(DataType::kFloat64);
  for (const auto& [name, bytes] : {std::pair<const char*, size_t>{"pipeline_block_bytes", options.pipeline_block_bytes},
                                    {"min_pipeline_block_bytes", options.min_pipeline_block_bytes}}) {
    if (bytes < kWidestElement) {
      return ExitBeforeBootstrap(bootstrap, absl::InvalidArgumentError(absl::StrCat(
                                                "rank ", bootstrap.rank, ": ", name, " is ", bytes,
                                                "; it must hold one element of every type (at least ",
                                                kWidestElement, " bytes)")));
    }
  }
  // The receive places per peer are device_slots plus a ring's few blocks, counted in an int:
  // near INT_MAX that sum overflowed. Far more slots than this would not fit any memory anyway.
  if (options.device_slots < 1 || options.device_slots > pipeline::kMaxDeviceSlots) {
    return ExitBeforeBootstrap(bootstrap, absl::InvalidArgumentError(absl::StrCat(
                                              "rank ", bootstrap.rank, ": device_slots is ", options.device_slots,
                                              "; it must be at least 1 and at most ", pipeline::kMaxDeviceSlots)));
  }
  // A mode outside the enum was taken for kAuto without a word.
  if (!pipeline::IsValidCompressionMode(options.compression)) {
    return ExitBeforeBootstrap(bootstrap, absl::InvalidArgumentError(absl::StrCat(
                                              "rank ", bootstrap.rank, ": compression mode ",
                                              static_cast<int>(options.compression),
                                              " is not one of kAuto (0), kOn (1), kOff (2)")));
  }
  absl::StatusOr<std::unique_ptr<HostCodecThreads>> cpu_codec_threads = HostCodecThreads::Create(options.cpu_codec_threads);
  if (!cpu_codec_threads.ok()) {
    return ExitBeforeBootstrap(bootstrap, absl::Status(cpu_codec_threads.status().code(),
                                                       absl::StrCat("rank ", bootstrap.rank, ": ",
                                                                    cpu_codec_threads.status().message())));
  }
  absl::StatusOr<std::unique_ptr<transport::Bootstrap>> joined = transport::Bootstrap::Create(bootstrap);
  if (!joined.ok()) return joined.status();
  impl->bootstrap = std::move(*joined);
  if (absl::Status s = CheckSharedOptionsAgree(*impl->bootstrap, options); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<pipeline::TransportLanes>> created =
      pipeline::TransportLanes::Create(*impl->bootstrap, options);
  if (!created.ok()) return created.status();
  impl->lanes = std::move(*created);
  const int codec_threads = (*cpu_codec_threads)->threads();
  impl->engine = std::make_unique<pipeline::Engine>(*impl->lanes, options, std::move(*cpu_codec_threads));
  UCCLZIP_LOG(kInfo) << "rank " << bootstrap.rank << " of " << bootstrap.world_size << ": communicator ready: "
                     << OptionsSummary(*impl->lanes) << ", CPU codec threads " << codec_threads;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

}  // namespace internal
}  // namespace ucclzip
