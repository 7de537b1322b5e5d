#include "rank_launcher.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip::bench {

bool RunningAsRank() {
  for (const char* name : {"UCCLZIP_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "UCCLZIP_UNIQUE_ID"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

absl::Status LaunchLocalRanks(int ranks) {
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("--ranks must be at least 1, got ", ranks));
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  absl::StatusOr<ReservedPort> reserved = ReservePort("127.0.0.1");
  if (!reserved.ok()) return reserved.status();

  std::vector<pid_t> children;
  const pid_t launcher = getpid();
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      close(reserved->listen_fd);
      return absl::InternalError("fork failed");
    }
    if (pid == 0) {
      // A rank must not outlive its launcher (killed by a timeout, say) and hold the GPU.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) std::_Exit(127);
      setenv("UCCLZIP_RANK", absl::StrCat(rank).c_str(), 1);
      setenv("UCCLZIP_WORLD_SIZE", absl::StrCat(ranks).c_str(), 1);
      setenv("UCCLZIP_LOCAL_RANK", absl::StrCat(rank).c_str(), 1);
      setenv("UCCLZIP_MASTER_ADDR", "127.0.0.1", 1);
      setenv("UCCLZIP_MASTER_PORT", absl::StrCat(reserved->port).c_str(), 1);
      if (rank == 0) {
        fcntl(reserved->listen_fd, F_SETFD, 0);  // only rank 0 inherits the reserved port
        setenv("UCCLZIP_LISTEN_FD", absl::StrCat(reserved->listen_fd).c_str(), 1);
      }
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      std::_Exit(127);
    }
    children.push_back(pid);
  }
  close(reserved->listen_fd);
  std::vector<std::string> failed;
  for (int rank = 0; rank < ranks; ++rank) {
    int status = 0;
    waitpid(children[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed.push_back(WIFEXITED(status) ? absl::StrCat("rank ", rank, " (exit ", WEXITSTATUS(status), ")")
                                         : absl::StrCat("rank ", rank, " (signal ", WTERMSIG(status), ")"));
    }
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("failed: ", absl::StrJoin(failed, ", ")));
}

int RunRankOrLaunch(const char* name, int ranks, absl::Status (*rank_main)()) {
  absl::Status status = RunningAsRank() ? rank_main() : LaunchLocalRanks(ranks);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace ucclzip::bench
