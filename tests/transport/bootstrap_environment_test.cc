// Configuration from launchers' environment variables and from unique ids.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip {
namespace {

// Clears every variable the bootstrap reads, so that the test's own environment cannot leak in.
class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"UCCLZIP_UNIQUE_ID", "UCCLZIP_MASTER_ADDR", "UCCLZIP_MASTER_PORT", "UCCLZIP_RANK",
                             "UCCLZIP_WORLD_SIZE", "UCCLZIP_LOCAL_RANK", "UCCLZIP_TOKEN", "UCCLZIP_BOOTSTRAP_TIMEOUT",
                             "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "UCCLZIP_LISTEN_FD", "UCCLZIP_HOST",
                             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID",
                             "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid"}) {
      unsetenv(name);
    }
  }
};

TEST_F(EnvironmentTest, TorchrunVariables) {
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  absl::StatusOr<BootstrapConfig> config = BootstrapConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "10.1.2.3");
  EXPECT_EQ(config->port, 29500);
  EXPECT_EQ(config->rank, 3);
  EXPECT_EQ(config->world_size, 8);
  EXPECT_EQ(config->local_rank, 1);
  EXPECT_EQ(config->timeout, absl::Seconds(60));
}

// Without UCCLZIP_TOKEN the token is the launcher's name for the job (the first of torchrun's run
// id and restart count, Slurm's job and step, PMIx's namespace, Open MPI's job id), so that ranks
// of another job, or of an earlier elastic restart, on the same port are refused; UCCLZIP_TOKEN
// wins; with neither it is empty, as before.
TEST_F(EnvironmentTest, WithoutATokenTheLaunchersNameForTheJobIsTheToken) {
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  auto token = [] {
    absl::StatusOr<BootstrapConfig> config = BootstrapConfigFromEnvironment();
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? config->token : std::string("(failed)");
  };
  EXPECT_EQ(token(), "");
  setenv("OMPI_MCA_orte_ess_jobid", "4242", 1);
  EXPECT_EQ(token(), "ompi 4242");
  setenv("PMIX_NAMESPACE", "prterun-node1-77@1", 1);
  EXPECT_EQ(token(), "pmix prterun-node1-77@1");
  setenv("SLURM_JOB_ID", "901", 1);
  setenv("SLURM_STEP_ID", "3", 1);
  EXPECT_EQ(token(), "slurm 901 step 3");
  setenv("TORCHELASTIC_RUN_ID", "job-a", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  EXPECT_EQ(token(), "torchelastic job-a restart 2");
  setenv("UCCLZIP_TOKEN", "secret", 1);
  EXPECT_EQ(token(), "secret");
}

TEST_F(EnvironmentTest, MpirunVariablesWithUcclzipOverrides) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("MASTER_ADDR", "ignored", 1);
  setenv("UCCLZIP_MASTER_ADDR", "node7", 1);
  setenv("UCCLZIP_MASTER_PORT", "6000", 1);
  setenv("UCCLZIP_TOKEN", "abc", 1);
  setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", "5", 1);
  absl::StatusOr<BootstrapConfig> config = BootstrapConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "node7");
  EXPECT_EQ(config->port, 6000);
  EXPECT_EQ(config->rank, 1);
  EXPECT_EQ(config->world_size, 2);
  EXPECT_EQ(config->local_rank, 0);
  EXPECT_EQ(config->token, "abc");
  EXPECT_EQ(config->timeout, absl::Seconds(5));
}

TEST_F(EnvironmentTest, MissingOrMalformedVariablesAreNamed) {
  absl::Status missing = BootstrapConfigFromEnvironment().status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("UCCLZIP_RANK"), absl::string_view::npos) << missing;

  setenv("RANK", "two", 1);
  setenv("WORLD_SIZE", "4", 1);
  absl::Status malformed = BootstrapConfigFromEnvironment().status();
  EXPECT_EQ(malformed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.message().find("RANK='two'"), absl::string_view::npos) << malformed;

  setenv("RANK", "4", 1);
  setenv("MASTER_ADDR", "h", 1);
  setenv("MASTER_PORT", "70000", 1);
  absl::Status port = BootstrapConfigFromEnvironment().status();
  EXPECT_NE(port.message().find("MASTER_PORT='70000'"), absl::string_view::npos) << port;

  setenv("MASTER_PORT", "7000", 1);
  absl::Status rank = BootstrapConfigFromEnvironment().status();
  EXPECT_NE(rank.message().find("rank 4 is not below the world size 4"), absl::string_view::npos) << rank;
}

TEST_F(EnvironmentTest, UniqueIdTravelsAsText) {
  absl::StatusOr<UniqueId> id = GetUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  std::string text = UniqueIdToString(*id);
  setenv("UCCLZIP_UNIQUE_ID", text.c_str(), 1);
  setenv("UCCLZIP_RANK", "1", 1);
  setenv("UCCLZIP_WORLD_SIZE", "2", 1);
  absl::StatusOr<BootstrapConfig> joiner = BootstrapConfigFromEnvironment();
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_NE(joiner->port, 0);
  EXPECT_EQ(joiner->token.size(), 32u);
  EXPECT_EQ(joiner->listen_fd, -1);

  absl::StatusOr<BootstrapConfig> root = BootstrapConfigFromUniqueId(*id, 0, 2);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_GE(root->listen_fd, 0);  // the socket GetUniqueId opened
  EXPECT_EQ(root->token, joiner->token);
  // The listening socket is handed out once.
  EXPECT_EQ(BootstrapConfigFromUniqueId(*id, 0, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  close(root->listen_fd);
}

// Rank 0's configuration takes the id's listening socket, once: a variable that fails after it
// would leak the socket, its port still bound, and leave the id unusable.
TEST_F(EnvironmentTest, RankZeroKeepsTheIdsSocketWhenAnotherVariableIsWrong) {
  absl::StatusOr<UniqueId> id = GetUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string text = UniqueIdToString(*id);
  setenv("UCCLZIP_UNIQUE_ID", text.c_str(), 1);
  setenv("UCCLZIP_RANK", "0", 1);
  setenv("UCCLZIP_WORLD_SIZE", "2", 1);
  setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", "soon", 1);
  absl::Status timeout = BootstrapConfigFromEnvironment().status();
  EXPECT_NE(timeout.message().find("UCCLZIP_BOOTSTRAP_TIMEOUT='soon'"), absl::string_view::npos) << timeout;
  unsetenv("UCCLZIP_BOOTSTRAP_TIMEOUT");
  // An inherited socket does not take the place of the id's (whose port the id names).
  absl::StatusOr<ReservedPort> other = ReservePort();
  ASSERT_TRUE(other.ok()) << other.status();
  setenv("UCCLZIP_LISTEN_FD", std::to_string(other->listen_fd).c_str(), 1);
  absl::StatusOr<BootstrapConfig> root = BootstrapConfigFromEnvironment();
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_GE(root->listen_fd, 0);
  EXPECT_NE(root->listen_fd, other->listen_fd);
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  ASSERT_EQ(getsockname(root->listen_fd, reinterpret_cast<sockaddr*>(&bound), &length), 0);
  EXPECT_EQ(ntohs(bound.sin_port), root->port);
  close(root->listen_fd);
  close(other->listen_fd);
}

// Every kind of malformed number a launcher or an operator may leave in a variable is refused,
// naming the variable and the value: none is read as a prefix, wrapped, or taken for another.
TEST_F(EnvironmentTest, MalformedNumbersAreRefusedNotReinterpreted) {
  const std::pair<const char*, const char*> bad[] = {
      {"UCCLZIP_MASTER_PORT", "0"},        {"UCCLZIP_MASTER_PORT", "70000"},  {"UCCLZIP_MASTER_PORT", "-1"},
      {"UCCLZIP_MASTER_PORT", "abc"},      {"UCCLZIP_MASTER_PORT", "12abc"},  {"UCCLZIP_MASTER_PORT", "0x10"},
      {"UCCLZIP_MASTER_PORT", "65536"},    {"UCCLZIP_MASTER_PORT", "1e3"},    {"UCCLZIP_MASTER_PORT", " "},
      {"UCCLZIP_RANK", "-1"},              {"UCCLZIP_RANK", "1.5"},           {"UCCLZIP_RANK", "18446744073709551616"},
      {"UCCLZIP_WORLD_SIZE", "0"},         {"UCCLZIP_WORLD_SIZE", "4294967298"}, {"UCCLZIP_LOCAL_RANK", "-2"},
      {"UCCLZIP_BOOTSTRAP_TIMEOUT", "0"},  {"UCCLZIP_BOOTSTRAP_TIMEOUT", "86401"}, {"UCCLZIP_BOOTSTRAP_TIMEOUT", "5s"},
      {"UCCLZIP_BOOTSTRAP_TIMEOUT", "inf"}, {"UCCLZIP_BOOTSTRAP_TIMEOUT", "-1"}, {"UCCLZIP_LISTEN_FD", "3x"}};
  for (const auto& [variable, value] : bad) {
    SetUp();
    setenv("UCCLZIP_MASTER_ADDR", "127.0.0.1", 1);
    setenv("UCCLZIP_MASTER_PORT", "6000", 1);
    setenv("UCCLZIP_RANK", "0", 1);
    setenv("UCCLZIP_WORLD_SIZE", "2", 1);
    setenv(variable, value, 1);
    absl::Status status = BootstrapConfigFromEnvironment().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << variable << "='" << value << "': " << status;
    EXPECT_NE(status.message().find(absl::StrCat(variable, "='", value, "'")), absl::string_view::npos) << status;
  }
}

// UCCLZIP_LISTEN_FD that is closed, a file or a socket never listened on: rank 0 adopted it and
// failed the rendezvous at once as if it had timed out, naming neither the variable nor why.
// It is refused naming both, and left open (it was never a socket this library could use).
TEST_F(EnvironmentTest, ListenFdThatIsNoListeningSocketIsRefused) {
  setenv("UCCLZIP_MASTER_ADDR", "127.0.0.1", 1);
  setenv("UCCLZIP_MASTER_PORT", "6000", 1);
  setenv("UCCLZIP_RANK", "0", 1);
  setenv("UCCLZIP_WORLD_SIZE", "2", 1);
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int unlistened = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int closed = dup(file);
  ASSERT_GE(file, 0);
  ASSERT_GE(unlistened, 0);
  ASSERT_GE(closed, 0);
  close(closed);
  for (const int fd : {file, unlistened, closed}) {
    setenv("UCCLZIP_LISTEN_FD", std::to_string(fd).c_str(), 1);
    absl::Status status = BootstrapConfigFromEnvironment().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(absl::StrCat("UCCLZIP_LISTEN_FD='", fd, "' is not a listening socket")),
              absl::string_view::npos)
        << status;
  }
  EXPECT_NE(fcntl(file, F_GETFD), -1);
  EXPECT_NE(fcntl(unlistened, F_GETFD), -1);
  // A Unix socket that listens: the other ranks connect over IPv4 TCP, and the rank table would
  // have told them 0.0.0.0.
  const int unix_socket = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(unix_socket, 0);
  sockaddr_un unix_address{};
  unix_address.sun_family = AF_UNIX;
  const std::string name = absl::StrCat("ucclzip-env-test-", getpid());  // abstract: no file
  std::memcpy(unix_address.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(bind(unix_socket, reinterpret_cast<const sockaddr*>(&unix_address),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  ASSERT_EQ(listen(unix_socket, 1), 0);
  setenv("UCCLZIP_LISTEN_FD", std::to_string(unix_socket).c_str(), 1);
  const absl::Status unix_status = BootstrapConfigFromEnvironment().status();
  EXPECT_EQ(unix_status.code(), absl::StatusCode::kInvalidArgument) << unix_status;
  EXPECT_NE(unix_status.message().find("is not an IPv4 TCP socket"), absl::string_view::npos) << unix_status;
  close(unix_socket);
  // A reserved port's socket is one.
  absl::StatusOr<ReservedPort> reserved = ReservePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  setenv("UCCLZIP_LISTEN_FD", std::to_string(reserved->listen_fd).c_str(), 1);
  absl::StatusOr<BootstrapConfig> config = BootstrapConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen_fd, reserved->listen_fd);
  close(reserved->listen_fd);
  close(file);
  close(unlistened);
}

// GetUniqueId with a UCCLZIP_HOST too long for the id's 128 bytes names the variable and the room.
TEST_F(EnvironmentTest, TooLongAdvertisedHostIsNamed) {
  const std::string host(83, 'h');
  setenv("UCCLZIP_HOST", host.c_str(), 1);
  absl::Status status = GetUniqueId().status();
  unsetenv("UCCLZIP_HOST");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("(UCCLZIP_HOST, 83 bytes) is too long for a unique id: at most 82 bytes"),
            absl::string_view::npos)
      << status;
  setenv("UCCLZIP_HOST", std::string(82, 'h').c_str(), 1);
  absl::StatusOr<UniqueId> id = GetUniqueId();
  unsetenv("UCCLZIP_HOST");
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<BootstrapConfig> root = BootstrapConfigFromUniqueId(*id, 0, 1);  // takes back its socket
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->host, std::string(82, 'h'));
  close(root->listen_fd);
}

TEST_F(EnvironmentTest, MalformedUniqueIdsAreRejected) {
  EXPECT_FALSE(UniqueIdFromString("abc").ok());
  EXPECT_FALSE(UniqueIdFromString(std::string(256, 'z')).ok());
  EXPECT_FALSE(UniqueIdFromString(std::string(256, '0')).ok());  // right shape, no magic
  EXPECT_FALSE(BootstrapConfigFromUniqueId(UniqueId{}, 1, 2).ok());
}

}  // namespace
}  // namespace ucclzip
