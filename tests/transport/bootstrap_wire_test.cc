#include "transport/bootstrap_wire.h"

#include <gtest/gtest.h>

#include "transport/wire_bytes.h"

namespace ucclzip::transport {
namespace {

TEST(BootstrapWire, HelloRoundTrips) {
  Hello hello;
  hello.rank = 3;
  hello.world_size = 8;
  hello.token = "secret";
  hello.mesh_port = 4242;
  absl::StatusOr<Hello> back = DecodeHello(EncodeHello(hello));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 3u);
  EXPECT_EQ(back->world_size, 8u);
  EXPECT_EQ(back->token, "secret");
  EXPECT_EQ(back->mesh_port, 4242);
}

TEST(BootstrapWire, StrangersAndOtherVersionsAreRejected) {
  EXPECT_EQ(DecodeHello("GET / HTTP/1.1\r\n").status().code(), absl::StatusCode::kInvalidArgument);
  Hello hello;
  hello.version = kBootstrapVersion + 1;
  absl::Status other_version = DecodeHello(EncodeHello(hello)).status();
  EXPECT_EQ(other_version.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other_version.message().find("version"), absl::string_view::npos);
  std::string truncated = EncodeHello(Hello{});
  truncated.pop_back();
  EXPECT_FALSE(DecodeHello(truncated).ok());
  // A token length that points past the end.
  std::string lying = WireWriter().U32(kBootstrapMagic).U16(kBootstrapVersion).U32(1).U32(2).U32(1'000'000).bytes();
  EXPECT_FALSE(DecodeHello(lying).ok());
}

TEST(BootstrapWire, CheckHelloNamesTheProblem) {
  std::vector<bool> seen(4, false);
  Hello hello;
  hello.rank = 2;
  hello.world_size = 4;
  hello.token = "t";
  EXPECT_TRUE(CheckHello(hello, 0, 4, "t", seen).ok());

  Hello wrong_size = hello;
  wrong_size.world_size = 5;
  absl::Status status = CheckHello(wrong_size, 0, 4, "t", seen);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "world size mismatch: rank 2 says 5, rank 0 says 4");

  EXPECT_EQ(CheckHello(hello, 0, 4, "other", seen).code(), absl::StatusCode::kPermissionDenied);
  Hello out_of_range = hello;
  out_of_range.rank = 4;
  EXPECT_EQ(CheckHello(out_of_range, 0, 4, "t", seen).code(), absl::StatusCode::kInvalidArgument);
  Hello itself = hello;
  itself.rank = 0;
  EXPECT_EQ(CheckHello(itself, 0, 4, "t", seen).code(), absl::StatusCode::kInvalidArgument);
  seen[2] = true;
  EXPECT_EQ(CheckHello(hello, 0, 4, "t", seen).code(), absl::StatusCode::kAlreadyExists);
}

TEST(BootstrapWire, VerdictCarriesCodeAndMessage) {
  EXPECT_TRUE(DecodeVerdict(EncodeVerdict(absl::OkStatus())).ok());
  absl::Status refused = DecodeVerdict(EncodeVerdict(absl::PermissionDeniedError("wrong token")));
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "wrong token");
  EXPECT_EQ(DecodeVerdict("xy").code(), absl::StatusCode::kDataLoss);
}

// An abort frame ends a wait with its failure; one that says OK (a hostile or broken peer) is
// itself the failure, never a success that the waiter would take for the message it wanted.
TEST(BootstrapWire, AnAbortIsAFailureEvenWhenItSaysOk) {
  absl::Status refused = DecodeAbort(EncodeVerdict(absl::DeadlineExceededError("rank 2 never arrived")));
  EXPECT_EQ(refused.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(refused.message(), "rank 2 never arrived");
  absl::Status ok_abort = DecodeAbort(EncodeVerdict(absl::OkStatus()));
  EXPECT_EQ(ok_abort.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ok_abort.message(), "malformed abort: it gives no failure");
  EXPECT_EQ(DecodeAbort("xy").code(), absl::StatusCode::kDataLoss);
}

// A rank that reached rank 0 over loopback is reached where rank 0 is; any other address is
// kept as rank 0 saw it.
TEST(BootstrapWire, ARankSeenOverLoopbackIsReachedAtRankZerosHost) {
  EXPECT_EQ(MeshHost("127.0.0.1", "node-a"), "node-a");
  EXPECT_EQ(MeshHost("127.0.1.1", "10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(MeshHost("127.0.0.1", "127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(MeshHost("10.0.0.2", "node-a"), "10.0.0.2");
  EXPECT_EQ(MeshHost("172.16.0.9", "127.0.0.1"), "172.16.0.9");
}

TEST(BootstrapWire, TableRoundTripsAndChecksItsSize) {
  std::vector<MeshEndpoint> table = {{"", 0}, {"10.0.0.2", 5000}, {"10.0.0.3", 5001}};
  absl::StatusOr<std::vector<MeshEndpoint>> back = DecodeTable(EncodeTable(table), 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[2].host, "10.0.0.3");
  EXPECT_EQ((*back)[2].port, 5001);
  EXPECT_FALSE(DecodeTable(EncodeTable(table), 4).ok());
  std::string cut = EncodeTable(table);
  cut.resize(cut.size() - 3);
  EXPECT_FALSE(DecodeTable(cut, 3).ok());
}

}  // namespace
}  // namespace ucclzip::transport
