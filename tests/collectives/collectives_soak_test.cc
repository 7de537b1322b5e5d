// A randomized soak of the collectives and point-to-point calls on host memory between real
// processes: every rank builds the same pseudo-random plan from one seed (so the ranks agree on
// every call) of 40 to 80 steps, each a lone call, a group of 1 to 4 calls, or 2 to 4 calls
// posted back to back outside a group before any is waited on, mixing collectives with matched
// Send/Recv pairs between random peers (a rank and itself too, in a group).
// Types, reductions, roots, in-place or not, a null receive buffer off a reduce's root, counts
// (0, 1, world - 1, world + 1, small odd ones and several pipeline blocks' worth) and each
// rank's own compression mode per call are drawn at random, and so are the communicator's
// block sizes, lanes, slots, staging and small-message algorithm thresholds. Every output is
// compared bit for bit with the reference, and every byte around it (guards, the untouched
// parts of in-place buffers, send buffers, non-roots' receive buffers) must keep its poison.
//
// CI runs one short round per world size (2 to 5) and transport (tcp, posix,sysv). For a longer
// soak: UCCLZIP_SOAK_SEED=<first seed> UCCLZIP_SOAK_ROUNDS=<rounds> (round r uses seed + r); a
// failure prints the seed that reproduces it with UCCLZIP_SOAK_ROUNDS=1, and
// UCCLZIP_SOAK_FIRST_STEP / UCCLZIP_SOAK_LAST_STEP run only part of that plan, to narrow it down;
// UCCLZIP_SOAK_STEPS sets the number of steps, and UCCLZIP_SOAK_MAX_WORLD adds world sizes
// above 5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective_test_util.h"
#include "pipeline_test_util.h"
#include "transport/message_tag.h"

namespace ucclzip::testing {
namespace {

// SplitMix64: the same sequence from the same seed in every process and on every platform,
// which the standard distributions do not promise.
class SoakRandom {
 public:
  explicit SoakRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  template <typename T, size_t N>
  T Pick(const T (&values)[N]) {
    return values[Below(N)];
  }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return values.begin()[Below(values.size())];
  }

 private:
  uint64_t state_;
};

const DataType kReducibleTypes[] = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32,
                                    DataType::kFloat8E4M3, DataType::kFloat8E5M2, DataType::kInt8,
                                    DataType::kUint8,  DataType::kInt32,   DataType::kUint32,
                                    DataType::kInt64,  DataType::kUint64,  DataType::kFloat64};
// Allgather, broadcast and point-to-point calls also move raw bytes, which cannot be reduced.
const DataType kEveryType[] = {DataType::kRaw,       DataType::kBFloat16,   DataType::kFloat16, DataType::kFloat32,
                               DataType::kFloat8E4M3, DataType::kFloat8E5M2, DataType::kInt8,    DataType::kUint8,
                               DataType::kInt32,     DataType::kUint32,     DataType::kInt64,   DataType::kUint64,
                               DataType::kFloat64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};
// kOn twice: it is the mode that compresses every block of the compressible types.
const CompressionMode kModes[] = {CompressionMode::kOn, CompressionMode::kOn, CompressionMode::kOff,
                                  CompressionMode::kAuto};
// Half the calls take a type the codec compresses, so that frames are common.
const DataType kCompressibleTypes[] = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32,
                                       DataType::kFloat8E4M3, DataType::kFloat8E5M2};
const char* const kTransports[] = {"tcp", "posix,sysv"};

// Poison around and inside every buffer: a byte written where the call has no business is seen.
constexpr uint8_t kPoison = 0xA5;
constexpr size_t kGuardBytes = 64;

// One call of a step: a collective, or a Send from `sender` matched by a Recv on `receiver`.
struct SoakCall {
  bool point_to_point = false;
  CollectiveCase collective;  // for point-to-point: its dtype, count and dist
  int sender = 0, receiver = 0;
  bool null_recv_off_root = false;    // a reduce's non-roots pass a null receive buffer
  // Every rank passes buffers that overlap without being in place: the call must fail at once
  // with InvalidArgument everywhere, write nothing, and take its places on its links so that
  // the calls after it still pair with their own (docs/COLLECTIVES.md, "Errors").
  bool refused_everywhere = false;
  std::vector<CompressionMode> modes;  // each rank's own (a collective's results do not depend on them)
  uint64_t seed = 0;                   // of the inputs
  std::string Name() const {
    if (!point_to_point) {
      // Not CollectiveCase::Name(): each rank's compression mode is in `modes`, not the case's.
      const CollectiveCase& c = collective;
      return absl::StrCat(CollectiveName(c.kind), " ", c.count, " x ", DataTypeName(c.dtype),
                          Reduces(c.kind) ? absl::StrCat(" ", ReduceOpName(c.op)) : "",
                          HasRoot(c.kind) ? absl::StrCat(" root ", c.root) : "", c.in_place ? " in-place" : "",
                          null_recv_off_root ? " null-recv-off-root" : "",
                          refused_everywhere ? " refused-everywhere" : "", " ", c.dist.Name());
    }
    return absl::StrCat("send/recv ", sender, "->", receiver, " ", collective.count, " x ",
                        DataTypeName(collective.dtype), " ", collective.dist.Name());
  }
};

// A step's calls go alone (one call), in one group, or back to back outside a group, all posted
// before any is waited on: calls in flight at once take their turns on every link in call order
// (docs/COLLECTIVES.md, "Link order"), and with host buffers on no stream every call returns at
// once.
enum class StepKind { kAlone, kGroup, kBackToBack };

struct SoakStep {
  StepKind kind = StepKind::kAlone;
  // A group posted inside a second GroupStart/GroupEnd, the inner GroupEnd after the first half
  // of its calls: as in NCCL, only the outermost GroupEnd posts (communicator.h).
  bool nested = false;
  bool grouped() const { return kind == StepKind::kGroup; }
  std::vector<SoakCall> calls;
  std::string Name() const {
    std::vector<std::string> names;
    for (const SoakCall& call : calls) {
      const auto mode_digit = [](std::string* out, CompressionMode m) { absl::StrAppend(out, static_cast<int>(m)); };
      names.push_back(absl::StrCat(call.Name(), " modes by rank ", absl::StrJoin(call.modes, "", mode_digit)));
    }
    const char* open = kind == StepKind::kGroup    ? (nested ? "nested-group{" : "group{")
                       : kind == StepKind::kBackToBack ? "back-to-back{"
                                                       : "";
    return absl::StrCat(open, absl::StrJoin(names, "; "), *open != '\0' ? "}" : "");
  }
};

struct SoakPlan {
  transport::TransportOptions options;
  // Where every link's transport sequences start: near the 20-bit wrap (transport/message_tag.h)
  // in some plans, so that their blocks take sequences on both sides of it.
  uint32_t first_sequence = 0;
  std::vector<SoakStep> steps;
  std::string OptionsName() const {
    return absl::StrCat("pipeline_block_bytes ", options.pipeline_block_bytes, " min_pipeline_block_bytes ",
                        options.min_pipeline_block_bytes, " block_bytes ", *options.block_bytes, " lanes ",
                        options.transport_lanes, " device_slots ", options.device_slots, " staged ",
                        options.stage_host_memory, " recursive_doubling_bytes ", options.recursive_doubling_bytes,
                        " tree_broadcast_bytes ", options.tree_broadcast_bytes, " min_compress_bytes ",
                        options.min_compress_bytes, " first_sequence ", first_sequence);
  }
};

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 0) : fallback;
}

// Counts that stress the chunking: empty, one element, fewer than the ranks, one more than
// them, small odd ones, and several pipeline blocks (per chunk, for allgather/reduce-scatter,
// whose count is per rank) with an odd remainder.
uint64_t DrawCount(SoakRandom& random, int world, DataType dtype, size_t pipeline_block_bytes) {
  const uint64_t block_elements = pipeline_block_bytes / ElementSize(dtype);
  switch (random.Below(7)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return uint64_t(world - 1);
    case 3: return uint64_t(world + 1);
    case 4: return 2 * random.Below(200) + 3;
    default: return block_elements * (1 + random.Below(4)) + 2 * random.Below(block_elements / 2 + 1) + 1;
  }
}

Distribution DrawDistribution(SoakRandom& random, DataType dtype) {
  if (!IsCompressibleType(dtype)) return {DistKind::kRandomBytes, 1};
  switch (random.Below(6)) {
    case 0: return {DistKind::kSpecialValues, 1};
    case 1: return {DistKind::kStudentT3, 0.01};
    case 2: return {DistKind::kGaussian, 3};
    default: return {DistKind::kGaussian, 0.02};
  }
}

SoakCall DrawCall(SoakRandom& random, int world, const SoakPlan& plan, bool in_group, uint64_t seed) {
  SoakCall call;
  call.seed = seed;
  CollectiveCase& c = call.collective;
  // About one call in three of a group is point-to-point; a lone step is one now and then.
  call.point_to_point = random.OneIn(in_group ? 3 : 6);
  if (call.point_to_point) {
    call.sender = int(random.Below(world));
    call.receiver = int(random.Below(world));
    // A transfer to this rank itself is only allowed in a group.
    if (!in_group && call.receiver == call.sender) call.receiver = (call.sender + 1) % world;
    c.dtype = random.OneIn(2) ? random.Pick(kCompressibleTypes) : random.Pick(kEveryType);
  } else {
    c.kind = random.Pick(kEveryCollective);
    c.dtype = random.OneIn(2)        ? random.Pick(kCompressibleTypes)
              : Reduces(c.kind) ? random.Pick(kReducibleTypes)
                                : random.Pick(kEveryType);
    c.op = Reduces(c.kind) ? random.Pick(kOps) : ReduceOp::kSum;
    c.root = HasRoot(c.kind) ? int(random.Below(world)) : 0;
    c.in_place = random.OneIn(3);
    call.null_recv_off_root = c.kind == Collective::kReduce && !c.in_place && random.OneIn(3);
  }
  c.count = DrawCount(random, world, c.dtype, plan.options.pipeline_block_bytes);
  // Only calls whose every rank reads and writes both buffers are refused on every rank (a
  // broadcast's or reduce's non-roots need not look at one of them), with 2 elements or more
  // so that the receive buffer, one element before the send buffer, overlaps it.
  const bool both_buffers_everywhere = !call.point_to_point && (c.kind == Collective::kAllReduce ||
                                                                c.kind == Collective::kAllGather ||
                                                                c.kind == Collective::kReduceScatter);
  if (both_buffers_everywhere && random.OneIn(16)) {
    call.refused_everywhere = true;
    c.in_place = false;
    c.count = std::max<uint64_t>(c.count, 2);
  }
  c.dist = DrawDistribution(random, c.dtype);
  for (int r = 0; r < world; ++r) call.modes.push_back(random.Pick(kModes));
  return call;
}

SoakPlan MakePlan(uint64_t seed, int world, const std::string& tls) {
  SoakRandom random(seed);
  SoakPlan plan;
  transport::TransportOptions& o = plan.options;
  o = PipelineOptions(tls);
  // Small blocks so that modest counts still span several pipeline and transport blocks; mostly
  // of 16 KiB or more, since the codec stores blocks of fewer than 4096 elements as they are
  // (codec/frame_format.h, kMinSplitCount) and only larger ones exercise frames.
  o.pipeline_block_bytes = random.Pick<size_t>({2 << 10, 16 << 10, 16 << 10, 32 << 10});
  o.min_pipeline_block_bytes =
      random.OneIn(2) ? o.pipeline_block_bytes : std::max<size_t>(8, o.pipeline_block_bytes / 4);
  o.block_bytes = random.Pick<size_t>({2 << 10, 8 << 10, 64 << 10});
  o.transport_lanes = 1 + int(random.Below(2));
  o.device_slots = random.Pick({1, 2, 4});
  o.stage_host_memory = random.OneIn(4);
  o.staging_pool_bytes = size_t{1} << 20;
  o.recursive_doubling_bytes = random.Pick<size_t>({0, 1 << 10, 256 << 10});
  o.tree_broadcast_bytes = random.Pick<size_t>({0, 2 << 10, 2 << 20});
  o.min_compress_bytes = random.OneIn(2) ? 0 : 2 << 10;
  plan.first_sequence = random.OneIn(3) ? transport::kMaxSequence - uint32_t(random.Below(400)) : 0;
  // UCCLZIP_SOAK_STEPS makes a longer-lived communicator (kAuto's memory, sequences, pools);
  // the plan's first steps stay the same.
  const uint64_t steps = EnvOr("UCCLZIP_SOAK_STEPS", 40 + random.Below(41));
  for (uint64_t s = 0; s < steps; ++s) {
    SoakStep step;
    const uint64_t draw = random.Below(6);
    step.kind = draw < 2 ? StepKind::kAlone : draw == 2 ? StepKind::kBackToBack : StepKind::kGroup;
    const uint64_t calls = step.kind == StepKind::kGroup        ? 1 + random.Below(4)
                           : step.kind == StepKind::kBackToBack ? 2 + random.Below(3)
                                                                : 1;
    for (uint64_t i = 0; i < calls; ++i) step.calls.push_back(DrawCall(random, world, plan, step.grouped(), s * 8 + i));
    step.nested = step.grouped() && random.OneIn(4);
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

// One call's buffers on this rank: a poisoned allocation with guards, the input where the call
// reads it and the region the call must write. Everything outside that region must keep the
// bytes it had before the call.
struct CallBuffers {
  std::vector<uint8_t> bytes, before;
  size_t send_offset = 0, recv_offset = 0;
  std::vector<uint8_t> want;  // the output expected at recv_offset
  bool posts = false;         // whether this rank takes part (point-to-point: sender or receiver)
  bool sends = false, receives = false;
  bool null_recv = false;
};

CallBuffers PrepareCollective(const SoakCall& call, const Communicator& comm) {
  const CollectiveCase& c = call.collective;
  const int world = comm.size(), rank = comm.rank();
  const size_t width = ElementSize(c.dtype);
  const std::vector<uint8_t> input = CaseInput(c, world, rank, call.seed);
  const size_t recv_bytes = RecvElements(c.Shape(world)) * width;
  CallBuffers b;
  b.posts = true;
  b.null_recv = call.null_recv_off_root && rank != c.root;
  size_t region = 0;
  if (call.refused_everywhere) {
    // The receive buffer starts one element before the send buffer: they overlap, and not as
    // in place. Nothing may be written, so everything must keep its bytes.
    b.recv_offset = kGuardBytes;
    b.send_offset = kGuardBytes + width;
    b.bytes.assign(kGuardBytes + std::max(input.size() + width, recv_bytes) + kGuardBytes, kPoison);
    std::memcpy(b.bytes.data() + b.send_offset, input.data(), input.size());
    b.before = b.bytes;
    return b;
  }
  if (c.in_place) {
    // In place, the input lies inside the output (allgather: at chunk `rank`) or the output
    // inside the input (reduce-scatter: at chunk `rank`), or they are the same (docs/COLLECTIVES.md).
    const size_t chunk_bytes = size_t(rank) * c.count * width;
    b.send_offset = kGuardBytes + (c.kind == Collective::kAllGather ? chunk_bytes : 0);
    b.recv_offset = kGuardBytes + (c.kind == Collective::kReduceScatter ? chunk_bytes : 0);
    region = std::max(input.size(), recv_bytes);
  } else {
    b.send_offset = kGuardBytes;
    b.recv_offset = kGuardBytes + input.size() + kGuardBytes;
    region = input.size() + kGuardBytes + (b.null_recv ? 0 : recv_bytes);
  }
  b.bytes.assign(kGuardBytes + region + kGuardBytes, kPoison);
  std::memcpy(b.bytes.data() + b.send_offset, input.data(), input.size());
  b.before = b.bytes;
  b.want = ReferenceOutput(c, comm, call.seed);
  // A reduce's non-root receives nothing: its receive buffer keeps what it held.
  if (b.want.empty() && !b.null_recv) {
    b.want.assign(b.before.begin() + b.recv_offset, b.before.begin() + b.recv_offset + recv_bytes);
  }
  return b;
}

CallBuffers PreparePointToPoint(const SoakCall& call, int rank) {
  const CollectiveCase& c = call.collective;
  CallBuffers b;
  b.sends = rank == call.sender;
  b.receives = rank == call.receiver;
  b.posts = b.sends || b.receives;
  const std::vector<uint8_t> payload = GenerateTensor(c.dtype, c.count, c.dist, call.seed * 31 + 7);
  b.send_offset = kGuardBytes;
  b.recv_offset = kGuardBytes + payload.size() + kGuardBytes;
  b.bytes.assign(b.recv_offset + payload.size() + kGuardBytes, kPoison);
  if (b.sends) std::memcpy(b.bytes.data() + b.send_offset, payload.data(), payload.size());
  b.before = b.bytes;
  if (b.receives) b.want = payload;
  return b;
}

// Posts this rank's part of the call, adding its Operations to `operations`.
void PostCall(Communicator& comm, const SoakCall& call, CallBuffers& b, std::vector<Operation>& operations) {
  operations.clear();
  const CompressionMode mode = call.modes[comm.rank()];
  uint8_t* const base = b.bytes.data();
  const CollectiveCase& c = call.collective;
  if (!call.point_to_point) {
    CollectiveCase with_mode = c;
    with_mode.mode = mode;
    void* const recv = b.null_recv ? nullptr : base + b.recv_offset;
    operations.push_back(Post(comm, with_mode, base + b.send_offset, recv, nullptr));
    return;
  }
  // Send before Recv: a transfer to itself pairs the group's k-th Send with its k-th Recv.
  if (b.sends) {
    operations.push_back(comm.Send(base + b.send_offset, c.count, c.dtype, call.receiver, nullptr,
                                   SendOptions{.compression = mode}));
  }
  if (b.receives) operations.push_back(comm.Recv(base + b.recv_offset, c.count, c.dtype, call.sender, nullptr));
}

// The output must match the reference, and every other byte must be what it was.
absl::Status CheckCall(const SoakCall& call, const CallBuffers& b, int rank) {
  const std::string what = absl::StrCat("rank ", rank, " ", call.Name());
  std::vector<uint8_t> expected = b.before;
  if (!b.want.empty()) std::memcpy(expected.data() + b.recv_offset, b.want.data(), b.want.size());
  if (absl::Status s = ExpectSameBytes(b.bytes.data() + b.recv_offset, expected.data() + b.recv_offset, b.want.size(),
                                       absl::StrCat(what, ": output"));
      !s.ok()) {
    return s;
  }
  return ExpectSameBytes(b.bytes.data(), expected.data(), expected.size(),
                         absl::StrCat(what, ": bytes outside the output (guards, inputs, untouched buffers)"));
}

// What one call's Operation must end with on this rank.
absl::Status ExpectOutcome(const SoakCall& call, const absl::Status& status, int rank, const std::string& what) {
  if (!call.refused_everywhere) {
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
  }
  return ExpectError(status, absl::StatusCode::kInvalidArgument, {absl::StrCat("rank ", rank), "overlap"},
                     absl::StrCat(what, " with overlapping buffers on every rank"));
}

absl::Status RunStep(Communicator& comm, const SoakStep& step) {
  const int rank = comm.rank();
  std::vector<CallBuffers> buffers;
  for (const SoakCall& call : step.calls) {
    buffers.push_back(call.point_to_point ? PreparePointToPoint(call, rank) : PrepareCollective(call, comm));
  }
  // Every call is posted before any is waited on (in a group, before GroupEnd posts them all).
  std::vector<std::vector<Operation>> operations(step.calls.size());
  if (step.grouped()) comm.GroupStart();
  if (step.nested) comm.GroupStart();
  for (size_t i = 0; i < step.calls.size(); ++i) {
    if (step.nested && i == step.calls.size() / 2) {
      // The inner GroupEnd posts nothing: its Operation is done and OK at once.
      const Operation inner = comm.GroupEnd();
      if (!inner.Test() || !inner.Wait(absl::ZeroDuration()).ok()) {
        comm.GroupEnd();
        return absl::InternalError(absl::StrCat("rank ", rank, ": an inner GroupEnd's Operation is not done and OK"));
      }
    }
    if (buffers[i].posts) PostCall(comm, step.calls[i], buffers[i], operations[i]);
  }
  // The group's Operation fails where one of its calls was refused (docs/COLLECTIVES.md, "Errors").
  bool any_refused = false;
  for (const SoakCall& call : step.calls) any_refused |= call.refused_everywhere;
  if (step.grouped()) {
    const absl::Status group = comm.GroupEnd().Wait(absl::Seconds(90));
    if (any_refused ? group.code() != absl::StatusCode::kInvalidArgument : !group.ok()) {
      return absl::Status(group.ok() ? absl::StatusCode::kInternal : group.code(),
                          absl::StrCat("rank ", rank, ": the group's Operation ended with \"", group.ToString(),
                                       "\"", any_refused ? " where a call of it was refused" : ""));
    }
  }
  // Every call's own Operations too, then its bytes.
  for (size_t i = 0; i < step.calls.size(); ++i) {
    const std::string what = absl::StrCat("rank ", rank, " call ", i, " ", step.calls[i].Name());
    for (const Operation& operation : operations[i]) {
      if (absl::Status s = ExpectOutcome(step.calls[i], operation.Wait(absl::Seconds(90)), rank, what); !s.ok()) {
        return s;
      }
    }
  }
  for (size_t i = 0; i < step.calls.size(); ++i) {
    if (absl::Status s = CheckCall(step.calls[i], buffers[i], rank); !s.ok()) return s;
  }
  return absl::OkStatus();
}

struct SoakParam {
  int world;
  int transport;  // index into kTransports
};

void PrintTo(const SoakParam& param, std::ostream* out) {
  *out << param.world << " ranks over " << kTransports[param.transport];
}

class CollectivesSoak : public ::testing::TestWithParam<SoakParam> {};

TEST_P(CollectivesSoak, RandomStepsOfCollectivesAndPointToPointInAndOutOfGroups) {
  const auto [world, transport] = GetParam();
  const std::string tls = kTransports[transport];
  const uint64_t first_seed = EnvOr("UCCLZIP_SOAK_SEED", 20261206);
  const uint64_t rounds = EnvOr("UCCLZIP_SOAK_ROUNDS", 1);
  const uint64_t first_step = EnvOr("UCCLZIP_SOAK_FIRST_STEP", 0);
  const uint64_t last_step = EnvOr("UCCLZIP_SOAK_LAST_STEP", UINT64_MAX);
  for (uint64_t round = 0; round < rounds; ++round) {
    const uint64_t seed = first_seed + round;
    // Each world size and transport draws its own plan from the same seed.
    const SoakPlan plan = MakePlan(seed * 1'000'003 + uint64_t(world) * 16 + uint64_t(transport), world, tls);
    const char* steps = std::getenv("UCCLZIP_SOAK_STEPS");
    const std::string reproduce =
        absl::StrCat("UCCLZIP_SOAK_SEED=", seed, " UCCLZIP_SOAK_ROUNDS=1", steps ? " UCCLZIP_SOAK_STEPS=" : "",
                     steps ? steps : "", " (world ", world, ", ", tls, "; ", plan.OptionsName(), ")");
    SCOPED_TRACE(reproduce);
    const absl::Time started = absl::Now();
    ExpectRanksSucceeded(RunRanks(
        {.world_size = world, .kill_after = absl::Seconds(300)}, [&](const RankContext& context) -> absl::Status {
          auto comm = CreateCommunicator(context, plan.options);
          if (!comm.ok()) return comm.status();
          internal::CommunicatorAccess::StartSequencesAt(**comm, plan.first_sequence);
          for (size_t s = first_step; s < plan.steps.size() && s <= last_step; ++s) {
            if (absl::Status status = RunStep(**comm, plan.steps[s]); !status.ok()) {
              status = absl::Status(status.code(), absl::StrCat(reproduce, ": step ", s, " ", plan.steps[s].Name(),
                                                                ": ", status.message()));
              // Printed at once too: calls still in flight may crash this rank on its way out.
              std::fprintf(stderr, "%s\n", status.ToString().c_str());
              std::fflush(stderr);
              return status;
            }
          }
          return absl::OkStatus();
        }));
    // A long soak prints each round's time: a round far slower than its neighbours hints at a
    // stall that recovered.
    if (rounds > 1) {
      std::printf("soak seed %llu: %.2f s\n", static_cast<unsigned long long>(seed),
                  absl::ToDoubleSeconds(absl::Now() - started));
      std::fflush(stdout);
    }
    if (::testing::Test::HasFailure()) return;  // the first failing seed is the one to reproduce
  }
}

// World sizes 2 to 5; UCCLZIP_SOAK_MAX_WORLD raises the largest for a local soak (the ranks,
// which re-run this binary, see the same variable and so the same tests).
std::vector<SoakParam> SoakParams() {
  std::vector<SoakParam> params;
  const int max_world = int(std::clamp<uint64_t>(EnvOr("UCCLZIP_SOAK_MAX_WORLD", 5), 2, 16));
  for (int transport = 0; transport < 2; ++transport) {
    for (int world = 2; world <= max_world; ++world) params.push_back({world, transport});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(, CollectivesSoak, ::testing::ValuesIn(SoakParams()), [](const auto& info) {
  return absl::StrCat(info.param.world, "ranks_", info.param.transport == 0 ? "tcp" : "shm");
});

}  // namespace
}  // namespace ucclzip::testing
