// Runs one test body in several real processes on this host, one per rank: the test binary
// re-executes itself with --gtest_filter set to the running test and the rank in the
// environment. The parent reserves rank 0's bootstrap port by listening on 127.0.0.1:0 and
// hands the listening socket to rank 0, so that no other process can take the port in between.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip::testing {

// What a rank's body gets: its place in the world and a ready bootstrap configuration.
struct RankContext {
  int rank = 0;
  int world_size = 0;
  BootstrapConfig bootstrap;
};

// Returns OK if the rank did what the test expects (including failing in the expected way);
// otherwise an error that the parent prints.
using RankBody = std::function<absl::Status(const RankContext&)>;

struct LaunchOptions {
  int world_size = 2;
  // Ranks that are not started at all (to test ranks that never arrive).
  std::vector<int> absent_ranks;
  // The bootstrap timeout every rank gets.
  absl::Duration bootstrap_timeout = absl::Seconds(30);
  // The parent kills whatever still runs after this long (or after UCCLZIP_TEST_KILL_AFTER_S
  // seconds, where that is shorter), printing its threads' stacks first.
  absl::Duration kill_after = absl::Seconds(120);
};

struct RankOutcome {
  int rank = 0;
  bool exited = false;    // false: killed by a signal (or by the parent's timeout)
  int exit_code = -1;
  int signal = 0;
  std::string output;     // the child's stdout and stderr
};

// Parent: starts the ranks, waits for them, returns their outcomes (absent ranks excluded).
// Child: runs `body` for its rank and exits; never returns.
std::vector<RankOutcome> RunRanks(const LaunchOptions& options, const RankBody& body);

// The usual check: every started rank exited with 0 (or, for ranks in `killed`, died by a
// signal); otherwise a failure that shows the rank's output.
void ExpectRanksSucceeded(const std::vector<RankOutcome>& outcomes, const std::vector<int>& killed = {});

}  // namespace ucclzip::testing
