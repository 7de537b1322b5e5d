// Messages between real processes over real UCX on this host: every size class, many at once,
// hundreds of receives pending while their messages come one by one, up to eight ranks, two
// communicators side by side, multi-part messages, over TCP and over shared memory, directly
// and through the staged path (host buffers with memcpy staging), with and without staging
// copy wake-ups.
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "transport/rank_helpers.h"

namespace ucclzip::testing {
namespace {

using transport::MemoryType;
using transport::OpTag;
using transport::Request;
using transport::TransportOptions;

struct Path {
  std::string name;
  std::string tls;
  bool staged;
  bool copy_wakeups = false;  // the progress thread sleeps while staging copies run
};

// Shared memory without cma: ptrace may be restricted where CI runs.
const Path kTcp{"tcp", "tcp", false};
const Path kShm{"shm", "posix,sysv", false};
const Path kTcpStaged{"tcp_staged", "tcp", true};
const Path kShmStaged{"shm_staged", "posix,sysv", true};
const Path kTcpStagedWakeups{"tcp_staged_wakeups", "tcp", true, true};
const Path kShmStagedWakeups{"shm_staged_wakeups", "posix,sysv", true, true};

TransportOptions OptionsFor(const Path& path) {
  TransportOptions options;
  options.ucx_transports = path.tls;
  options.stage_host_memory = path.staged;
  options.staging_copy_wakeups = path.copy_wakeups;
  options.op_timeout = absl::Seconds(60);
  // Small blocks and a small pool make every size above cross block and pool boundaries.
  options.block_bytes = size_t{1} << 20;
  options.staging_pool_bytes = size_t{8} << 20;
  return options;
}

std::string PathName(const ::testing::TestParamInfo<Path>& info) { return info.param.name; }

// Every rank sends `sizes[i]` bytes to every other rank and receives the same from each, all
// posted at once; every byte is checked.
absl::Status ExchangeAll(transport::Transport& transport, const std::vector<size_t>& sizes, uint32_t first_sequence) {
  const int rank = transport.rank();
  const int size = transport.size();
  std::vector<std::vector<uint8_t>> outgoing, incoming;
  std::vector<std::shared_ptr<Request>> requests;
  struct Expected {
    int sender;
    size_t index;
    size_t buffer;
  };
  std::vector<Expected> expected;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (size_t i = 0; i < sizes.size(); ++i) {
      incoming.emplace_back(sizes[i]);
      expected.push_back({peer, i, incoming.size() - 1});
      requests.push_back(transport.Recv(peer, incoming.back().data(), sizes[i], MemoryType::kHost,
                                        OpTag{first_sequence + static_cast<uint32_t>(i), 0}));
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (size_t i = 0; i < sizes.size(); ++i) {
      outgoing.emplace_back(sizes[i]);
      FillPattern(outgoing.back().data(), sizes[i], SeedOf(rank, peer, i));
      requests.push_back(transport.Send(peer, outgoing.back().data(), sizes[i], MemoryType::kHost,
                                        OpTag{first_sequence + static_cast<uint32_t>(i), 0}));
    }
  }
  if (absl::Status s = WaitAll(requests, absl::Now() + absl::Seconds(90)); !s.ok()) return s;
  for (const Expected& e : expected) {
    auto what = absl::StrCat("rank ", rank, ": message ", e.index, " (", sizes[e.index], " bytes) from rank ", e.sender);
    if (absl::Status s = VerifyPattern(incoming[e.buffer].data(), sizes[e.index], SeedOf(e.sender, rank, e.index), what);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

class TransportPaths : public ::testing::TestWithParam<Path> {};

TEST_P(TransportPaths, EverySizeClassArrivesIntact) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto communicator = CreateCommunicator(context, OptionsFor(path));
    if (!communicator.ok()) return communicator.status();
    const size_t mb = size_t{1} << 20;
    return ExchangeAll(TransportOf(**communicator),
                       {0, 1, 7, 8, 4096, 65'537, mb - 1, mb, mb + 1, 3 * mb + 5, 64 * mb}, 0);
  });
  ExpectRanksSucceeded(outcomes);
}

TEST_P(TransportPaths, ManyOperationsInFlightAmongFourRanks) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    auto communicator = CreateCommunicator(context, OptionsFor(path));
    if (!communicator.ok()) return communicator.status();
    std::vector<size_t> sizes;
    for (size_t i = 0; i < 48; ++i) sizes.push_back((i * 37'813) % 2'500'000);
    return ExchangeAll(TransportOf(**communicator), sizes, 1000);
  });
  ExpectRanksSucceeded(outcomes);
}

// Hundreds of receives posted at once, their messages sent one at a time in reverse order:
// each receive completes when its message has arrived, while the others stay pending (the
// progress thread advances only the operations that UCX reported on, and retires only those).
TEST_P(TransportPaths, EachOfHundredsOfPendingReceivesCompletesWhenItsMessageArrives) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    TransportOptions options = OptionsFor(path);
    options.block_bytes = size_t{64} << 10;  // up to 4 blocks a message
    auto communicator = CreateCommunicator(context, options);
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    constexpr uint32_t kMessages = 300, kHalf = kMessages / 2;
    constexpr OpTag kPosted{kMessages, 0}, kGo{kMessages + 1, 0};  // the receiver's signals
    std::vector<size_t> sizes;
    for (uint32_t i = 0; i < kMessages; ++i) sizes.push_back((size_t{i} * 7'919) % (size_t{200} << 10));
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    uint8_t signal = 1;
    if (context.rank == 0) {
      // Sends messages [from, to) from the last to the first, each once the previous one is done.
      auto send_backwards = [&](uint32_t from, uint32_t to) -> absl::Status {
        for (uint32_t i = to; i-- > from;) {
          std::vector<uint8_t> message(sizes[i]);
          FillPattern(message.data(), sizes[i], SeedOf(0, 1, i));
          if (absl::Status s = transport.Send(1, message.data(), sizes[i], MemoryType::kHost, OpTag{i, 0})->Wait(deadline);
              !s.ok()) {
            return s;
          }
        }
        return absl::OkStatus();
      };
      if (absl::Status s = transport.Recv(1, &signal, 1, MemoryType::kHost, kPosted)->Wait(deadline); !s.ok()) return s;
      if (absl::Status s = send_backwards(kHalf, kMessages); !s.ok()) return s;
      if (absl::Status s = transport.Recv(1, &signal, 1, MemoryType::kHost, kGo)->Wait(deadline); !s.ok()) return s;
      return send_backwards(0, kHalf);
    }
    std::vector<std::vector<uint8_t>> incoming;
    std::vector<std::shared_ptr<Request>> receives;
    for (uint32_t i = 0; i < kMessages; ++i) {
      incoming.emplace_back(sizes[i]);
      receives.push_back(transport.Recv(0, incoming[i].data(), sizes[i], MemoryType::kHost, OpTag{i, 0}));
    }
    // Waits for messages [from, to) from the last to the first, as they are sent, and checks them.
    auto receive_backwards = [&](uint32_t from, uint32_t to) -> absl::Status {
      for (uint32_t i = to; i-- > from;) {
        if (absl::Status s = receives[i]->Wait(deadline); !s.ok()) return s;
        auto what = absl::StrCat("message ", i, " (", sizes[i], " bytes)");
        if (absl::Status s = VerifyPattern(incoming[i].data(), sizes[i], SeedOf(0, 1, i), what); !s.ok()) return s;
      }
      return absl::OkStatus();
    };
    if (absl::Status s = transport.Send(0, &signal, 1, MemoryType::kHost, kPosted)->Wait(deadline); !s.ok()) return s;
    if (absl::Status s = receive_backwards(kHalf, kMessages); !s.ok()) return s;
    for (uint32_t i = 0; i < kHalf; ++i) {
      if (receives[i]->Test()) {
        return absl::InternalError(absl::StrCat("the receive of message ", i, " completed before it was sent: ",
                                                receives[i]->Wait(deadline).ToString()));
      }
    }
    if (absl::Status s = transport.Send(0, &signal, 1, MemoryType::kHost, kGo)->Wait(deadline); !s.ok()) return s;
    return receive_backwards(0, kHalf);
  });
  ExpectRanksSucceeded(outcomes);
}

INSTANTIATE_TEST_SUITE_P(, TransportPaths,
                         ::testing::Values(kTcp, kShm, kTcpStaged, kShmStaged, kTcpStagedWakeups, kShmStagedWakeups),
                         PathName);

class DirectPaths : public ::testing::TestWithParam<Path> {};

TEST_P(DirectPaths, Message256MBArrivesIntact) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    TransportOptions options = OptionsFor(path);
    options.block_bytes = size_t{4} << 20;
    auto communicator = CreateCommunicator(context, options);
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    const size_t bytes = size_t{256} << 20;
    std::vector<uint8_t> buffer(bytes);
    if (context.rank == 0) {
      FillPattern(buffer.data(), bytes, 256);
      return transport.Send(1, buffer.data(), bytes, MemoryType::kHost, OpTag{1, 0})->Wait(absl::Now() + absl::Seconds(90));
    }
    absl::Status received =
        transport.Recv(0, buffer.data(), bytes, MemoryType::kHost, OpTag{1, 0})->Wait(absl::Now() + absl::Seconds(90));
    if (!received.ok()) return received;
    return VerifyPattern(buffer.data(), bytes, 256, "rank 1: 256 MB message");
  });
  ExpectRanksSucceeded(outcomes);
}

TEST_P(DirectPaths, EightRanksShiftAroundTheRing) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 8}, [&](const RankContext& context) -> absl::Status {
    auto communicator = CreateCommunicator(context, OptionsFor(path));
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    const int next = (context.rank + 1) % 8, previous = (context.rank + 7) % 8;
    for (uint32_t round = 0; round < 3; ++round) {
      const size_t bytes = (size_t{3} << 20) / (round + 1) + round;
      std::vector<uint8_t> out(bytes), in(bytes);
      FillPattern(out.data(), bytes, SeedOf(context.rank, next, round));
      auto recv = transport.Recv(previous, in.data(), bytes, MemoryType::kHost, OpTag{round, 0});
      auto send = transport.Send(next, out.data(), bytes, MemoryType::kHost, OpTag{round, 0});
      if (absl::Status s = WaitAll({recv, send}, absl::Now() + absl::Seconds(60)); !s.ok()) return s;
      auto what = absl::StrCat("rank ", context.rank, ": round ", round, " from rank ", previous);
      if (absl::Status s = VerifyPattern(in.data(), bytes, SeedOf(previous, context.rank, round), what); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  ExpectRanksSucceeded(outcomes);
}

INSTANTIATE_TEST_SUITE_P(, DirectPaths, ::testing::Values(kTcp, kShm), PathName);

// "mm" is UCX's older name of posix, sysv and xpmem. The transport did not know it for shared
// memory and asked UCX for peer error handling, which shared memory cannot give: with
// ucx_transports (or UCX_TLS) "mm" every endpoint was unreachable and creation failed.
TEST(TransportAliases, MmNamesSharedMemory) {
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto communicator = CreateCommunicator(context, OptionsFor(Path{"mm", "mm", false}));
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    std::vector<uint8_t> buffer(4096);
    if (context.rank == 0) {
      FillPattern(buffer.data(), buffer.size(), 7);
      return transport.Send(1, buffer.data(), buffer.size(), MemoryType::kHost, OpTag{1, 0})
          ->Wait(absl::Now() + absl::Seconds(20));
    }
    absl::Status received = transport.Recv(0, buffer.data(), buffer.size(), MemoryType::kHost, OpTag{1, 0})
                                ->Wait(absl::Now() + absl::Seconds(20));
    if (!received.ok()) return received;
    return VerifyPattern(buffer.data(), buffer.size(), 7, "rank 1: message over mm");
  });
  ExpectRanksSucceeded(outcomes);
}

// A staging pool smaller than one block per direction (4 MB blocks, a 1 MB pool) is sized up to
// that where staging happens, and does not matter where it does not: messages of several blocks
// arrive on both paths instead of a refusal.
class SmallStagingPool : public ::testing::TestWithParam<Path> {};

TEST_P(SmallStagingPool, IsSizedToFitTheBlocks) {
  const Path path = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    TransportOptions options = OptionsFor(path);
    options.block_bytes = size_t{4} << 20;
    options.staging_pool_bytes = size_t{1} << 20;
    auto communicator = CreateCommunicator(context, options);
    if (!communicator.ok()) return communicator.status();
    return ExchangeAll(TransportOf(**communicator), {(size_t{9} << 20) + 3, 100'000}, 0);
  });
  ExpectRanksSucceeded(outcomes);
}

INSTANTIATE_TEST_SUITE_P(, SmallStagingPool, ::testing::Values(kTcp, kTcpStaged), PathName);

// A transport block of 0 bytes, or one so large that the block counts and staging sizes computed
// from it would overflow, is refused at creation with the value and the range.
TEST(Transport, BlockBytesOutsideTheirRangeAreRefused) {
  for (size_t block_bytes : {size_t{0}, transport::kMaxBlockBytes + 1, size_t{1} << 50}) {
    auto outcomes = RunRanks({.world_size = 1}, [&](const RankContext& context) -> absl::Status {
      TransportOptions options = OptionsFor(kTcp);
      options.block_bytes = block_bytes;
      auto communicator = CreateCommunicator(context, options);
      if (communicator.ok()) return absl::InternalError(absl::StrCat("block_bytes ", block_bytes, " was accepted"));
      if (communicator.status().code() != absl::StatusCode::kInvalidArgument ||
          !absl::StrContains(communicator.status().message(), absl::StrCat("block_bytes is ", block_bytes))) {
        return absl::InternalError(absl::StrCat("unexpected refusal: ", communicator.status().ToString()));
      }
      return absl::OkStatus();
    });
    ExpectRanksSucceeded(outcomes);
  }
}

// Two communicators over the same ranks, with identical op tags in flight on both at once:
// neither may see the other's messages. The second one is formed from a unique id that rank 0
// hands out over the first one's bootstrap.
TEST(Transport, TwoCommunicatorsNeverCross) {
  auto outcomes = RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    TransportOptions options = OptionsFor(kTcp);
    auto first = CreateCommunicator(context, options);
    if (!first.ok()) return first.status();
    transport::Bootstrap& bootstrap = internal::CommunicatorAccess::BootstrapOf(**first);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    UniqueId id;
    if (context.rank == 0) {
      absl::StatusOr<UniqueId> made = GetUniqueId();
      if (!made.ok()) return made.status();
      id = *made;
      std::string text = UniqueIdToString(id);
      for (int peer = 1; peer < context.world_size; ++peer) {
        if (absl::Status s = bootstrap.Send(peer, 7, text, deadline); !s.ok()) return s;
      }
    } else {
      absl::StatusOr<std::string> text = bootstrap.Recv(0, 7, deadline);
      if (!text.ok()) return text.status();
      absl::StatusOr<UniqueId> parsed = UniqueIdFromString(*text);
      if (!parsed.ok()) return parsed.status();
      id = *parsed;
    }
    absl::StatusOr<BootstrapConfig> second_config = BootstrapConfigFromUniqueId(id, context.rank, context.world_size);
    if (!second_config.ok()) return second_config.status();
    options.ucx_transports = "posix,sysv";
    auto second = internal::CommunicatorAccess::Create(*second_config, options);
    if (!second.ok()) return second.status();

    transport::Transport* transports[2] = {&TransportOf(**first), &TransportOf(**second)};
    const int peer = (context.rank + 1) % context.world_size, from = (context.rank + 2) % context.world_size;
    const size_t bytes = 300'000;
    std::vector<std::vector<uint8_t>> out(2, std::vector<uint8_t>(bytes)), in(2, std::vector<uint8_t>(bytes));
    std::vector<std::shared_ptr<Request>> requests;
    for (int c = 0; c < 2; ++c) {
      FillPattern(out[c].data(), bytes, SeedOf(context.rank, peer, c));
      requests.push_back(transports[c]->Recv(from, in[c].data(), bytes, MemoryType::kHost, OpTag{5, 1}));
    }
    for (int c = 1; c >= 0; --c) requests.push_back(transports[c]->Send(peer, out[c].data(), bytes, MemoryType::kHost, OpTag{5, 1}));
    if (absl::Status s = WaitAll(requests, absl::Now() + absl::Seconds(30)); !s.ok()) return s;
    for (int c = 0; c < 2; ++c) {
      auto what = absl::StrCat("rank ", context.rank, ": communicator ", c, " from rank ", from);
      if (absl::Status s = VerifyPattern(in[c].data(), bytes, SeedOf(from, context.rank, c), what); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  ExpectRanksSucceeded(outcomes);
}

// One logical message in two parts (streams): the first goes at once, the second a while later
// (as the coded exponents follow the raw plane); the receiver posts both up front.
TEST(Transport, MessageInTwoPartsSentAtDifferentTimes) {
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto communicator = CreateCommunicator(context, OptionsFor(kTcp));
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    const size_t part_bytes[2] = {size_t{3} << 20, 12'345};
    std::vector<uint8_t> parts[2] = {std::vector<uint8_t>(part_bytes[0]), std::vector<uint8_t>(part_bytes[1])};
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    if (context.rank == 0) {
      for (int p = 0; p < 2; ++p) FillPattern(parts[p].data(), part_bytes[p], 40 + p);
      auto raw = transport.Send(1, parts[0].data(), part_bytes[0], MemoryType::kHost, OpTag{9, 0});
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto rest = transport.Send(1, parts[1].data(), part_bytes[1], MemoryType::kHost, OpTag{9, 1});
      return WaitAll({raw, rest}, deadline);
    }
    auto rest = transport.Recv(0, parts[1].data(), part_bytes[1], MemoryType::kHost, OpTag{9, 1});
    auto raw = transport.Recv(0, parts[0].data(), part_bytes[0], MemoryType::kHost, OpTag{9, 0});
    if (absl::Status s = raw->Wait(deadline); !s.ok()) return s;
    if (absl::Status s = rest->Wait(deadline); !s.ok()) return s;
    for (int p = 0; p < 2; ++p) {
      if (absl::Status s = VerifyPattern(parts[p].data(), part_bytes[p], 40 + p, absl::StrCat("part ", p)); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  ExpectRanksSucceeded(outcomes);
}

}  // namespace
}  // namespace ucclzip::testing
