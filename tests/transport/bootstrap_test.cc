// The bootstrap between ranks that run as threads of this process (the sockets are real):
// allgather, barrier, point-to-point with out-of-order tags, strangers, and failures that
// must reach every rank.
#include "transport/bootstrap.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "transport/bootstrap_arrivals.h"
#include "transport/bootstrap_wire.h"
#include "transport/socket.h"
#include "transport/wire_bytes.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip::transport {
namespace {

// Runs `body(rank, config)` for every rank on its own thread; rank 0 gets a reserved port
// (ReservePort, as a launcher does).
void RunThreads(int world_size, const std::function<void(int, const BootstrapConfig&)>& body) {
  absl::StatusOr<ReservedPort> reserved = ReservePort("127.0.0.1");
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  ASSERT_GT(reserved->port, 0);
  const Socket listener(reserved->listen_fd);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    BootstrapConfig config;
    config.port = reserved->port;
    config.rank = rank;
    config.world_size = world_size;
    config.timeout = absl::Seconds(10);
    config.token = "t";
    if (rank == 0) config.listen_fd = dup(listener.fd());
    threads.emplace_back(body, rank, config);
  }
  for (auto& thread : threads) thread.join();
}

// Plays a rank by hand: connects to rank 0 at `port`, says `hello` and reads rank 0's answer.
struct HelloAnswered {
  Socket root;
  Frame verdict;
};
absl::StatusOr<HelloAnswered> HelloByHand(uint16_t port, const Hello& hello, absl::Time deadline) {
  absl::StatusOr<Socket> root = ConnectWithRetry("127.0.0.1", port, deadline);
  if (!root.ok()) return root.status();
  if (absl::Status said = SendHello(*root, hello, deadline); !said.ok()) return said;
  absl::StatusOr<Frame> verdict = RecvFrame(*root, deadline);
  if (!verdict.ok()) return verdict.status();
  return HelloAnswered{std::move(*root), std::move(*verdict)};
}

TEST(Bootstrap, AllGatherBarrierAndPointToPointAmongFourRanks) {
  RunThreads(4, [](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    Bootstrap& b = **bootstrap;
    EXPECT_EQ(b.rank(), rank);
    EXPECT_EQ(b.size(), 4);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    // Rank 2 contributes nothing: empty contributions are legal.
    absl::StatusOr<std::vector<std::string>> all = b.AllGather(rank == 2 ? "" : std::string(rank + 1, 'a' + rank), deadline);
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(*all, (std::vector<std::string>{"a", "bb", "", "dddd"}));
    // Each rank sends two tagged messages to the next; the next takes them in the other order.
    const int next = (rank + 1) % 4, previous = (rank + 3) % 4;
    ASSERT_TRUE(b.Send(next, 2, absl::StrCat("second from ", rank), deadline).ok());
    ASSERT_TRUE(b.Send(next, 1, absl::StrCat("first from ", rank), deadline).ok());
    EXPECT_EQ(b.Recv(previous, 1, deadline).value_or("error"), absl::StrCat("first from ", previous));
    EXPECT_EQ(b.Recv(previous, 2, deadline).value_or("error"), absl::StrCat("second from ", previous));
    EXPECT_TRUE(b.Barrier(deadline).ok());
    EXPECT_EQ(b.Send(next, uint64_t{1} << 63, "x", deadline).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(b.Send(rank, 1, "x", deadline).code(), absl::StatusCode::kInvalidArgument);
  });
}

// Only rank 0 listens: an inherited listening socket handed to another rank is closed by the
// bootstrap, as rank 0's is once it is done, not leaked with its port.
TEST(Bootstrap, AnotherRanksInheritedSocketIsClosed) {
  int handed = -1;
  RunThreads(2, [&](int rank, BootstrapConfig config) {
    if (rank == 1) {
      absl::StatusOr<ReservedPort> spare = ReservePort("127.0.0.1");
      ASSERT_TRUE(spare.ok()) << spare.status();
      config.listen_fd = handed = spare->listen_fd;
    }
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  });
  ASSERT_GE(handed, 0);
  EXPECT_EQ(fcntl(handed, F_GETFD), -1) << "fd " << handed << " is still open";
}

// A message cut off part way (its receive timed out after its first bytes came) leaves the
// connection inside it: read on, the rest of that message was taken for messages of its own.
// Here the cut-off message's 16 payload bytes look like a whole message with tag 5, which rank 0
// never sent: rank 1's next receive must fail, saying why, not return it.
TEST(Bootstrap, AMessageCutOffPartWayClosesTheConnectionToFurtherMessages) {
  RunThreads(2, [](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    Bootstrap& b = **bootstrap;
    if (rank == 0) {
      WireWriter inner;
      inner.U64(5).U64(0);  // a whole frame's header: tag 5, no payload
      WireWriter outer;
      outer.U64(7).U64(inner.bytes().size());
      ASSERT_EQ(send(b.peer_fd(1), outer.bytes().data(), outer.bytes().size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(outer.bytes().size()));
      absl::SleepFor(absl::Milliseconds(500));
      ASSERT_EQ(send(b.peer_fd(1), inner.bytes().data(), inner.bytes().size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(inner.bytes().size()));
      absl::SleepFor(absl::Seconds(1));  // until rank 1 has read on
      return;
    }
    const absl::StatusOr<std::string> cut = b.Recv(0, 7, absl::Now() + absl::Milliseconds(200));
    EXPECT_EQ(cut.status().code(), absl::StatusCode::kDeadlineExceeded) << cut.status();
    absl::SleepFor(absl::Milliseconds(600));  // the rest of the cut-off message has come
    const absl::StatusOr<std::string> next = b.Recv(0, 5, absl::Now() + absl::Milliseconds(300));
    ASSERT_FALSE(next.ok()) << "a message rank 0 never sent was received";
    EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition) << next.status();
    EXPECT_NE(next.status().message().find("in the middle of a message"), absl::string_view::npos) << next.status();
    EXPECT_NE(next.status().message().find("rank 0"), absl::string_view::npos) << next.status();
  });
}

// Where nobody listens yet on a port of the ephemeral range, Linux may give the connecting end
// that very port, and the socket connects to itself (TCP's simultaneous open): a rank that
// started before rank 0 read its own hello back. In a network namespace of its own whose
// ephemeral range is that one port, the first attempt always does; the connection must go on
// waiting for a listener instead. Root only (the namespace), as CI runs.
TEST(Bootstrap, AConnectionToItselfIsNotTakenForThePeer) {
  constexpr uint16_t kPort = 40000;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    const int control = ::socket(AF_INET, SOCK_DGRAM, 0);
    ifreq loopback{};
    std::strncpy(loopback.ifr_name, "lo", IFNAMSIZ - 1);
    loopback.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
    // A namespace whose settings are not this process's to change (a container's read-only
    // /proc/sys) cannot run the test.
    const auto not_allowed = [] { return errno == EPERM || errno == EACCES || errno == EROFS; };
    if (control < 0 || ioctl(control, SIOCSIFFLAGS, &loopback) != 0) _exit(not_allowed() ? 77 : 3);
    const std::string range = absl::StrCat(kPort, " ", kPort);
    const int range_file = open("/proc/sys/net/ipv4/ip_local_port_range", O_WRONLY);
    if (range_file < 0) _exit(not_allowed() ? 77 : 4);
    if (write(range_file, range.data(), range.size()) != static_cast<ssize_t>(range.size())) _exit(4);
    close(range_file);
    absl::StatusOr<Socket> connection = ConnectWithRetry("127.0.0.1", kPort, absl::Now() + absl::Milliseconds(300));
    if (connection.ok()) _exit(1);  // connected to itself
    if (!absl::IsDeadlineExceeded(connection.status())) _exit(2);
    // The socket that connected to itself left the port free for rank 0, not in TIME_WAIT.
    _exit(ListenTcpEveryInterface("127.0.0.1", kPort, 1).ok() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no network namespace of its own (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: connected to itself; 2: another error; 3, 4: the namespace's setup "
                                        "failed; 5: the port was not free afterwards";
}

// Rank 0's name may not resolve yet when the others start (on Kubernetes a pod's service name
// resolves once the pod is up): connecting waits for it until the deadline, as for a rank 0
// that does not listen yet, and then names the host and the lookup's failure. It failed at once.
TEST(Bootstrap, ANameThatDoesNotResolveYetIsWaitedForUntilTheDeadline) {
  const absl::Time start = absl::Now();
  const absl::StatusOr<Socket> connected =
      ConnectWithRetry("no-such-host-yet.invalid", 29999, start + absl::Milliseconds(300));
  ASSERT_FALSE(connected.ok());
  EXPECT_EQ(connected.status().code(), absl::StatusCode::kDeadlineExceeded) << connected.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_NE(connected.status().message().find("cannot resolve host 'no-such-host-yet.invalid'"), absl::string_view::npos)
      << connected.status();
}

TEST(Bootstrap, ReservePortNamesAnAddressItCannotUse) {
  // A documentation address (RFC 5737) that no interface of this host has: bind fails at once.
  absl::StatusOr<ReservedPort> reserved = ReservePort("192.0.2.1");
  EXPECT_FALSE(reserved.ok());
  EXPECT_NE(reserved.status().message().find("reserving a bootstrap port"), std::string::npos) << reserved.status();
  EXPECT_NE(reserved.status().message().find("192.0.2.1"), std::string::npos) << reserved.status();
}

TEST(Bootstrap, StrangerIsRefusedAndTheRendezvousGoesOn) {
  RunThreads(2, [](int rank, BootstrapConfig config) {
    if (rank == 1) {
      absl::StatusOr<Socket> stranger = ConnectWithRetry("127.0.0.1", config.port, absl::Now() + absl::Seconds(5));
      ASSERT_TRUE(stranger.ok()) << stranger.status();
      std::string request = "GET / HTTP/1.0\r\n\r\n";
      ASSERT_TRUE(SendAll(*stranger, request.data(), request.size(), absl::Now() + absl::Seconds(5)).ok());
    }
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    EXPECT_TRUE((*bootstrap)->Barrier(absl::Now() + absl::Seconds(5)).ok());
  });
}

// A connection that rank 1's mesh refuses (here rank 2's, with the wrong token: rank 0 checked
// the right one) is named in rank 1's error when rank 2 never comes, not dropped unsaid.
TEST(Bootstrap, MeshRefusalsAreNamedWhenTheRankNeverComes) {
  RunThreads(3, [](int rank, BootstrapConfig config) {
    config.timeout = absl::Seconds(3);
    if (rank != 2) {
      absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
      if (rank == 0) return;  // admitted every rank; its mesh is rank 1's and rank 2's business
      ASSERT_EQ(bootstrap.status().code(), absl::StatusCode::kDeadlineExceeded) << bootstrap.status();
      EXPECT_NE(bootstrap.status().message().find("rank 2 never connected (refused: connection from 127.0.0.1"),
                absl::string_view::npos) << bootstrap.status();
      EXPECT_NE(bootstrap.status().message().find("rank 2 presented the wrong token"), absl::string_view::npos)
          << bootstrap.status();
      return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    Hello hello;
    hello.rank = 2;
    hello.world_size = 3;
    hello.token = config.token;
    absl::StatusOr<HelloAnswered> answered = HelloByHand(config.port, hello, deadline);
    ASSERT_TRUE(answered.ok()) << answered.status();
    ASSERT_TRUE(DecodeVerdict(answered->verdict.payload).ok());
    absl::StatusOr<Frame> table_frame = RecvFrame(answered->root, deadline);
    ASSERT_TRUE(table_frame.ok()) << table_frame.status();
    absl::StatusOr<std::vector<MeshEndpoint>> table = DecodeTable(table_frame->payload, 3);
    ASSERT_TRUE(table.ok()) << table.status();
    absl::StatusOr<Socket> mesh = ConnectWithRetry("127.0.0.1", (*table)[1].port, deadline);
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    hello.token = "not the token";
    ASSERT_TRUE(SendHello(*mesh, hello, deadline).ok());
    absl::SleepFor(absl::Seconds(4));  // holds rank 0's connection until rank 1 has given up
  });
}

// Rank 0 listens on every interface: the others may reach it at another address than the one
// its own configuration names (on Debian a host's own name resolves to 127.0.1.1 there, and to
// its network address everywhere else). Here rank 0 is told 127.0.0.2 and rank 1 comes to
// 127.0.0.1; rank 0 used to listen on 127.0.0.2 alone, and rank 1 waited in vain.
TEST(Bootstrap, RankZeroIsReachedAtAnyOfItsAddresses) {
  uint16_t port = 0;
  {
    absl::StatusOr<Socket> probe = ListenTcp("0.0.0.0", 0, 1);
    ASSERT_TRUE(probe.ok()) << probe.status();
    port = LocalPort(*probe).value();
  }
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([rank, port] {
      BootstrapConfig config;
      config.host = rank == 0 ? "127.0.0.2" : "127.0.0.1";
      config.port = port;
      config.rank = rank;
      config.world_size = 2;
      config.timeout = absl::Seconds(3);
      absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
      ASSERT_TRUE(bootstrap.ok()) << "rank " << rank << ": " << bootstrap.status();
      EXPECT_TRUE((*bootstrap)->Barrier(absl::Now() + absl::Seconds(5)).ok());
    });
  }
  for (std::thread& rank : ranks) rank.join();
}

// A rank 0 whose configured address is not one of its host's (started on the wrong host) fails
// at once, naming it, rather than waiting for ranks that look for it elsewhere.
TEST(Bootstrap, RankZeroAtAnAddressOfAnotherHostFailsAtOnce) {
  std::ifstream nonlocal_bind("/proc/sys/net/ipv4/ip_nonlocal_bind");
  int allowed = 0;
  if (nonlocal_bind >> allowed && allowed != 0) GTEST_SKIP() << "this host binds addresses that are not its own";
  BootstrapConfig config;
  config.host = "192.0.2.1";  // TEST-NET-1: no host's
  config.rank = 0;
  config.port = 29500;
  config.world_size = 2;
  config.timeout = absl::Seconds(10);
  const absl::Time start = absl::Now();
  const absl::Status status = Bootstrap::Create(config).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("'192.0.2.1' is not an address of this host"), absl::string_view::npos) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

// Connections are taken in the order their hellos begin: silent strangers delay no rank. Each
// of these three used to hold the rendezvous up for 5 s in turn, longer than its deadline.
TEST(Bootstrap, SilentStrangersHoldUpNoRank) {
  RunThreads(3, [](int rank, const BootstrapConfig& config) {
    std::vector<Socket> strangers;
    if (rank == 1) {
      for (int i = 0; i < 3; ++i) {
        absl::StatusOr<Socket> stranger = ConnectWithRetry("127.0.0.1", config.port, absl::Now() + absl::Seconds(5));
        ASSERT_TRUE(stranger.ok()) << stranger.status();
        strangers.push_back(std::move(*stranger));
      }
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << "rank " << rank << ": " << bootstrap.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "rank " << rank;
    EXPECT_TRUE((*bootstrap)->Barrier(absl::Now() + absl::Seconds(5)).ok());
  });
}

TEST(Bootstrap, FailedAllGatherReachesEveryRankFast) {
  RunThreads(3, [](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    if (rank == 2) return;  // leaves: its connections close
    const absl::Time start = absl::Now();
    absl::Status status = (*bootstrap)->AllGather("x", absl::Now() + absl::Seconds(10)).status();
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("rank 2 did not contribute"), absl::string_view::npos) << status;
    EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "rank " << rank << " waited for the deadline";
  });
}

// The result of an allgather travels as one frame: a contribution too large for it is refused
// by name on the rank that made it and fails the collective on every rank at once, and the
// next collective runs as if nothing happened, whichever ranks refused (no frame of the failed
// one is left behind for it to read). Without the check, a contribution that fits a frame of
// its own went out and the result broke every connection from rank 0.
class AllGatherRefusals : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(AllGatherRefusals, FailEveryRankAtOnceAndLeaveTheNextCollectiveClean) {
  constexpr int kWorld = 3;
  const std::vector<int> refusing = GetParam();
  RunThreads(kWorld, [&](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    const bool refuses = std::find(refusing.begin(), refusing.end(), rank) != refusing.end();
    const std::string too_large(kMaxFrameBytes - 4, 'x');
    const absl::Time start = absl::Now();
    absl::Status status =
        (*bootstrap)->AllGather(refuses ? absl::string_view(too_large) : "small", start + absl::Seconds(10)).status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << "rank " << rank << " waited for the deadline";
    ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "rank " << rank << ": " << status;
    EXPECT_NE(status.message().find(absl::StrCat("contribution of ", too_large.size(), " bytes exceeds the limit")),
              absl::string_view::npos) << status;
    if (refuses) EXPECT_NE(status.message().find(absl::StrCat("rank ", rank, ":")), absl::string_view::npos) << status;
    for (int again = 0; again < 2; ++again) {
      absl::StatusOr<std::vector<std::string>> next = (*bootstrap)->AllGather(absl::StrCat(rank), absl::Now() + absl::Seconds(10));
      ASSERT_TRUE(next.ok()) << "rank " << rank << ": " << next.status();
      EXPECT_EQ(*next, (std::vector<std::string>{"0", "1", "2"}));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Bootstrap, AllGatherRefusals,
                         ::testing::Values(std::vector<int>{1}, std::vector<int>{2}, std::vector<int>{0},
                                           std::vector<int>{0, 1, 2}));

// Contributions that fit one by one but not together: rank 0 refuses the result, every rank
// says so, and the next collective runs.
TEST(Bootstrap, AnAllGatherResultTooLargeForOneFrameFailsEveryRank) {
  RunThreads(3, [](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    const std::string half(kMaxFrameBytes / 2, 'h');
    absl::Status status = (*bootstrap)->AllGather(half, absl::Now() + absl::Seconds(10)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "rank " << rank << ": " << status;
    EXPECT_NE(status.message().find(absl::StrCat("allgather result of ", 8 + 3 * (half.size() + 4), " bytes from 3 ranks")),
              absl::string_view::npos) << status;
    absl::StatusOr<std::vector<std::string>> next = (*bootstrap)->AllGather(absl::StrCat(rank), absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(next.ok()) << "rank " << rank << ": " << next.status();
    EXPECT_EQ(*next, (std::vector<std::string>{"0", "1", "2"}));
  });
}

// Messages nobody asked for are buffered up to a bound in bytes, not only in count: past it the
// connection fails, saying why, where it used to buffer up to 4096 frames of 64 MiB.
TEST(Bootstrap, UnclaimedMessagesAreBoundedInBytes) {
  RunThreads(2, [](int rank, const BootstrapConfig& config) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    Bootstrap& b = **bootstrap;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    if (rank == 1) {
      const std::string large(kMaxFrameBytes / 2, 'u');
      for (int i = 0; i < 9; ++i) {
        if (!b.Send(0, 7, large, deadline).ok()) break;  // rank 0 may have stopped reading
      }
      b.Send(0, 8, "asked for", deadline).IgnoreError();
      return;
    }
    absl::StatusOr<std::string> asked = b.Recv(1, 8, deadline);
    ASSERT_FALSE(asked.ok()) << "4.5 frame limits of unclaimed messages were buffered";
    EXPECT_EQ(asked.status().code(), absl::StatusCode::kResourceExhausted) << asked.status();
    EXPECT_NE(asked.status().message().find("nobody asked for"), absl::string_view::npos) << asked.status();
    EXPECT_NE(asked.status().message().find(absl::StrCat(4 * kMaxFrameBytes, " bytes")), absl::string_view::npos)
        << asked.status();
    // What was buffered intact is still delivered; past it the connection says why at once.
    EXPECT_EQ(b.Recv(1, 7, deadline).value_or("").size(), kMaxFrameBytes / 2);
    const absl::Time asked_again = absl::Now();
    EXPECT_EQ(b.Recv(1, 8, asked_again + absl::Seconds(5)).status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_LT(absl::Now() - asked_again, absl::Seconds(1));
  });
}

// A rank of another protocol version is told why rank 0 refuses it, as a wrong token is, not
// just hung up on.
TEST(Bootstrap, OtherProtocolVersionIsToldWhy) {
  RunThreads(2, [](int rank, BootstrapConfig config) {
    if (rank == 0) {
      config.timeout = absl::Seconds(2);
      EXPECT_EQ(Bootstrap::Create(config).status().code(), absl::StatusCode::kDeadlineExceeded);
      return;
    }
    Hello hello;
    hello.version = kBootstrapVersion + 1;
    hello.rank = 1;
    hello.world_size = 2;
    hello.token = config.token;
    absl::StatusOr<HelloAnswered> answered = HelloByHand(config.port, hello, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(answered.ok()) << answered.status();
    EXPECT_EQ(answered->verdict.tag, kVerdictTag);
    const absl::Status why = DecodeVerdict(answered->verdict.payload);
    EXPECT_EQ(why.code(), absl::StatusCode::kFailedPrecondition) << why;
    EXPECT_NE(why.message().find(absl::StrCat("version ", kBootstrapVersion + 1)), absl::string_view::npos) << why;
  });
}

// The CPU time the calling thread has used.
absl::Duration ThreadCpuTime() {
  timespec used{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &used);
  return absl::DurationFromTimespec(used);
}

// Without a deadline (an infinite timeout) a rank waits for a late peer asleep, as it does with
// one, not polling on its core until the peer comes.
TEST(Bootstrap, WaitWithoutDeadlineSleeps) {
  RunThreads(2, [](int rank, BootstrapConfig config) {
    config.timeout = absl::InfiniteDuration();
    const absl::Duration late = absl::Milliseconds(300);
    if (rank == 1) absl::SleepFor(late);
    const absl::Duration cpu_before = ThreadCpuTime();
    absl::StatusOr<std::unique_ptr<Bootstrap>> bootstrap = Bootstrap::Create(config);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
    if (rank == 1) absl::SleepFor(late);
    EXPECT_TRUE((*bootstrap)->Barrier(absl::InfiniteFuture()).ok());
    if (rank == 0) {
      // Waited 2 x 300 ms for rank 1.
      EXPECT_LT(ThreadCpuTime() - cpu_before, absl::Milliseconds(100)) << "rank 0 polled while it waited";
    }
  });
}

TEST(Bootstrap, BadConfigurationsAreRejectedUpFront) {
  BootstrapConfig config;
  config.world_size = 2;
  config.rank = 2;
  config.port = 1;
  EXPECT_EQ(Bootstrap::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.rank = 1;
  config.port = 0;
  EXPECT_NE(Bootstrap::Create(config).status().message().find("no port"), absl::string_view::npos);
  config.world_size = 0;
  EXPECT_EQ(Bootstrap::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

// An inherited descriptor that is no listening socket (a file, a socket never listened on) made
// every accept fail at once, which the rendezvous reported as its timeout passing ("timed out
// after 1m: rank 1 never arrived") the moment it started. The accept's own failure is the error.
TEST(Bootstrap, InheritedDescriptorThatCannotAcceptIsNamed) {
  for (const bool file : {true, false}) {
    BootstrapConfig config;
    config.world_size = 2;
    config.rank = 0;
    config.port = 1;
    config.timeout = absl::Seconds(30);
    config.listen_fd = file ? open("/dev/null", O_RDONLY | O_CLOEXEC) : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(config.listen_fd, 0);
    const absl::Time start = absl::Now();
    const absl::Status status = Bootstrap::Create(config).status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << status;
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_NE(status.message().find(absl::StrCat("inherited socket ", config.listen_fd)), absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("accept"), absl::string_view::npos) << status;
    EXPECT_EQ(fcntl(config.listen_fd, F_GETFD), -1);  // adopted, and closed on the failure
  }
}

// A flood of silent connections (a port scanner, a health probe) through a long rendezvous: each
// is dropped after the silence limit and counted, but only the first Refusals::kNamed are kept
// for the error (until session 38 every one was, without bound).
TEST(BootstrapArrivals, SilentConnectionsAreCountedButOnlyTheFirstAreNamed) {
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0, 512);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<uint16_t> port = LocalPort(*listener);
  ASSERT_TRUE(port.ok()) << port.status();
  constexpr int kSilent = 200;
  std::vector<Socket> strangers;
  for (int i = 0; i < kSilent; ++i) {
    absl::StatusOr<Socket> stranger = ConnectWithRetry("127.0.0.1", *port, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(stranger.ok()) << stranger.status();
    strangers.push_back(std::move(*stranger));
  }
  Arrivals arrivals(*listener, absl::Milliseconds(1));
  Refusals dropped;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (dropped.count() < kSilent && absl::Now() < give_up) {
    absl::StatusOr<Socket> next = arrivals.Next(absl::Now() + absl::Milliseconds(50), &dropped);
    ASSERT_FALSE(next.ok()) << "a silent connection was handed out";
  }
  EXPECT_EQ(dropped.count(), static_cast<size_t>(kSilent));
  const std::string list = dropped.List();
  EXPECT_NE(list.find(absl::StrCat("; and ", kSilent - Refusals::kNamed, " more)")), std::string::npos) << list;
  size_t named = 0;
  for (size_t at = list.find("connection from"); at != std::string::npos; at = list.find("connection from", at + 1)) ++named;
  EXPECT_EQ(named, Refusals::kNamed) << list;
}

}  // namespace
}  // namespace ucclzip::transport
