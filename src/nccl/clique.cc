#include "nccl/clique.h"

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "nccl/comm.h"
#include "nccl/group.h"

namespace ucclzip::nccl {
namespace {

struct KeptRanks {
  absl::Mutex mutex;
  std::vector<ncclComm*> kept ABSL_GUARDED_BY(mutex);
};

KeptRanks& Kept() {
  static auto* kept = new KeptRanks;  // never destroyed: a destruction may come during exit
  return *kept;
}

// Ends the ranks together, on a thread each where there are several (each waits for the others).
void EndTogether(std::vector<ncclComm*> ranks) {
  if (ranks.size() == 1) {
    delete ranks.front();
    return;
  }
  std::vector<DeferredStep> steps;
  for (ncclComm* rank : ranks) {
    steps.push_back({.run =
                         [rank] {
                           delete rank;
                           return absl::OkStatus();
                         },
                     // Without a thread for every rank the others would wait for it: each
                     // leaves without waiting for the rest.
                     .abandon =
                         [rank](const absl::Status&) {
                           if (rank->communicator != nullptr) rank->communicator->Abort();
                           delete rank;
                           return absl::OkStatus();
                         }});
  }
  // Their destructions already reported their operations' outcome; what is left cannot fail.
  RunConcurrently(std::move(steps), "ncclCommDestroy").IgnoreError();
}

}  // namespace

void EndWithItsClique(ncclComm* comm, bool at_once) {
  std::vector<ncclComm*> ending;
  {
    KeptRanks& kept = Kept();
    absl::MutexLock lock(&kept.mutex);
    const bool others_live = AnyLiveRankOf(comm->clique);
    if (others_live && !at_once) {
      kept.kept.push_back(comm);
      return;
    }
    if (!others_live) {
      std::erase_if(kept.kept, [&](ncclComm* rank) {
        if (rank->clique != comm->clique) return false;
        ending.push_back(rank);
        return true;
      });
    }
  }
  ending.push_back(comm);
  EndTogether(std::move(ending));
}

}  // namespace ucclzip::nccl
