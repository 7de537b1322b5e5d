#include "transport/multi_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "transport/socket.h"

namespace ucclzip::testing {
namespace {

constexpr char kRankVar[] = "UCCLZIP_TEST_CHILD_RANK";
constexpr char kWorldVar[] = "UCCLZIP_TEST_CHILD_WORLD";
constexpr char kPortVar[] = "UCCLZIP_TEST_CHILD_PORT";
constexpr char kListenFdVar[] = "UCCLZIP_TEST_CHILD_LISTEN_FD";
constexpr char kTimeoutVar[] = "UCCLZIP_TEST_CHILD_BOOTSTRAP_MS";
constexpr char kKillAfterVar[] = "UCCLZIP_TEST_KILL_AFTER_S";

int IntFromEnv(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = fallback;
  if (text == nullptr || !absl::SimpleAtoi(text, &value)) return fallback;
  return value;
}

[[noreturn]] void RunChild(const RankBody& body) {
  RankContext context;
  context.rank = IntFromEnv(kRankVar, -1);
  context.world_size = IntFromEnv(kWorldVar, 0);
  context.bootstrap.host = "127.0.0.1";
  context.bootstrap.port = static_cast<uint16_t>(IntFromEnv(kPortVar, 0));
  context.bootstrap.rank = context.rank;
  context.bootstrap.world_size = context.world_size;
  context.bootstrap.timeout = absl::Milliseconds(IntFromEnv(kTimeoutVar, 30'000));
  context.bootstrap.listen_fd = IntFromEnv(kListenFdVar, -1);
  absl::Status status = body(context);
  std::fprintf(stderr, "rank %d: %s\n", context.rank, status.ToString().c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status.ok() ? 0 : 1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The threads' stacks of a hung rank, when gdb is installed: they say where it hangs, which a
// bare "killed" does not.
// gdb where there is one; elfutils' eu-stack otherwise (scripts/gpu-gather brings it to the
// GPU machine, which has no gdb).
std::string StacksOf(pid_t pid) {
  std::string command;
  if (std::system("command -v gdb >/dev/null 2>&1") == 0) {
    command = absl::StrCat("gdb -p ", pid, " -batch -nx -ex 'thread apply all bt 30' 2>&1");
  } else if (std::system("command -v eu-stack >/dev/null 2>&1") == 0) {
    command = absl::StrCat("eu-stack -m -p ", pid, " -n 30 2>&1");  // -m: each frame's library
  } else {
    return "(neither gdb nor eu-stack to print the stacks)\n";
  }
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "(gdb did not start)\n";
  std::string stacks;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0;) stacks.append(chunk, n);
  pclose(pipe);
  return stacks;
}

std::string CurrentTestFilter() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat("--gtest_filter=", info->test_suite_name(), ".", info->name());
}

}  // namespace

std::vector<RankOutcome> RunRanks(const LaunchOptions& options, const RankBody& body) {
  if (std::getenv(kRankVar) != nullptr) RunChild(body);

  absl::StatusOr<transport::Socket> listener = transport::ListenTcp("127.0.0.1", 0, 1024);
  if (!listener.ok()) {
    ADD_FAILURE() << "cannot reserve a bootstrap port: " << listener.status();
    return {};
  }
  const uint16_t port = transport::LocalPort(*listener).value_or(0);
  const std::string filter = CurrentTestFilter();
  char self[4096] = {};
  ssize_t self_length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (self_length <= 0) {
    ADD_FAILURE() << "cannot find the test binary";
    return {};
  }

  std::vector<RankOutcome> outcomes;
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int rank = 0; rank < options.world_size; ++rank) {
    if (std::count(options.absent_ranks.begin(), options.absent_ranks.end(), rank)) continue;
    std::string log = absl::StrCat(::testing::TempDir(), "ucclzip_rank_", getpid(), "_", rank, ".log");
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      // A rank must not outlive its test (killed by ctest's timeout, say) and hold the GPU.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) std::_Exit(127);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      setenv(kRankVar, absl::StrCat(rank).c_str(), 1);
      setenv(kWorldVar, absl::StrCat(options.world_size).c_str(), 1);
      setenv(kPortVar, absl::StrCat(port).c_str(), 1);
      setenv(kTimeoutVar, absl::StrCat(absl::ToInt64Milliseconds(options.bootstrap_timeout)).c_str(), 1);
      if (rank == 0) {
        // Only rank 0 inherits the listening socket: had the others kept it, connections would
        // still be queued on it after rank 0 died.
        fcntl(listener->fd(), F_SETFD, 0);
        setenv(kListenFdVar, absl::StrCat(listener->fd()).c_str(), 1);
      }
      std::string filter_copy = filter;
      char* argv[] = {self, filter_copy.data(), nullptr};
      execv(self, argv);
      std::_Exit(127);
    }
    outcomes.push_back(RankOutcome{rank});
    pids.push_back(pid);
    logs.push_back(log);
  }
  listener->Close();

  // UCCLZIP_TEST_KILL_AFTER_S may shorten (never lengthen) the wait: a GPU run that repeats a
  // test to catch a rare hang then spends its device time on repeats, not on waiting.
  const absl::Duration kill_after = std::min(options.kill_after, absl::Seconds(IntFromEnv(kKillAfterVar, INT_MAX)));
  const absl::Time kill_at = absl::Now() + kill_after;
  size_t running = pids.size();
  std::vector<bool> reaped(pids.size(), false);
  std::vector<std::string> stacks(pids.size());
  bool killed = false;
  while (running > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (reaped[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      reaped[i] = true;
      --running;
      outcomes[i].exited = WIFEXITED(status);
      outcomes[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      outcomes[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    if (running > 0 && !killed && absl::Now() > kill_at) {
      killed = true;
      for (size_t i = 0; i < pids.size(); ++i) {
        if (reaped[i]) continue;
        stacks[i] = absl::StrCat("\n--- stacks of the hung rank ", outcomes[i].rank, " ---\n", StacksOf(pids[i]));
        kill(pids[i], SIGKILL);
      }
      ADD_FAILURE() << "ranks still running after " << kill_after << "; killed";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    outcomes[i].output = ReadFile(logs[i]) + stacks[i];
    std::remove(logs[i].c_str());
  }
  return outcomes;
}

void ExpectRanksSucceeded(const std::vector<RankOutcome>& outcomes, const std::vector<int>& killed) {
  for (const RankOutcome& outcome : outcomes) {
    bool expect_killed = std::count(killed.begin(), killed.end(), outcome.rank) > 0;
    if (expect_killed) {
      EXPECT_FALSE(outcome.exited) << "rank " << outcome.rank << " should have been killed; output:\n" << outcome.output;
    } else {
      EXPECT_TRUE(outcome.exited && outcome.exit_code == 0)
          << "rank " << outcome.rank << " failed (exit " << outcome.exit_code << ", signal " << outcome.signal
          << "); output:\n" << outcome.output;
    }
  }
}

}  // namespace ucclzip::testing
