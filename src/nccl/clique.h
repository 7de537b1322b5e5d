// The ranks of one communicator that live in this process: its clique here (ncclCommInitAll's
// ranks, or any made from one ncclUniqueId in one process). Ending a rank waits for every other
// rank (Communicator's destruction is a barrier), so a thread that destroys its ranks one after
// another, as NCCL's own single-process example does, waited the whole shutdown timeout at the
// first of them (10 s by default, then a warning from every rank). A rank destroyed while others
// of its clique here are still live is therefore kept, ended only with the last of them, all at
// once.
#pragma once

#include <nccl.h>

namespace ucclzip::nccl {

// Ends `comm`, which is no longer live (RegisterLive): at once where no other rank of its clique
// here is live and not itself being destroyed (ncclComm::destroying), together with the ranks of
// its clique kept so far; otherwise it is kept until then. `at_once` ends it now either way (an
// aborted rank, which waits for no other; one with operations still running). A kept rank whose
// clique's other ranks are never destroyed is never ended: its threads, UCX worker and
// connections stay until the process exits, as a communicator that is never destroyed does.
void EndWithItsClique(ncclComm* comm, bool at_once);

}  // namespace ucclzip::nccl
