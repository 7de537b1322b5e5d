// Starts the ranks of a multi-process benchmark on this host: the benchmark binary re-executes
// itself (same arguments) once per rank, with the rank's place in UCCLZIP_* variables and
// rank 0 holding a listening socket reserved on 127.0.0.1, so that no port can be taken in
// between. Under a real launcher (torchrun, mpirun) the benchmark skips this and reads the
// launcher's variables instead.
#pragma once

#include "absl/status/status.h"

namespace ucclzip::bench {

// True in a process that a launcher (ours or another) started as one rank.
bool RunningAsRank();

// Runs `ranks` copies of this process and waits for them; an error names the ranks that failed.
absl::Status LaunchLocalRanks(int ranks);

// A subcommand's main: runs `rank_main` when this process is a rank, else starts `ranks` local
// ranks; prints a failure as "<name>: <status>" and returns the exit code.
int RunRankOrLaunch(const char* name, int ranks, absl::Status (*rank_main)());

}  // namespace ucclzip::bench
