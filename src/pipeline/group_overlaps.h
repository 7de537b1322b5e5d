// The calls of one group run side by side, in no order: a call that writes a buffer which
// another call of the group reads or writes races with it, and either may see the other's bytes
// half written, wrong data with no error. Such calls are refused, each naming a call it races
// with (the overlap of a Send and Recv to this rank itself is self_transfers.h's, which pairs
// them into one copy first; a copy of a buffer onto itself races with nothing).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {

// Per spec, OK or why it conflicts with another spec of the same group (naming the other; the
// task's failure puts the spec's own description first).
std::vector<absl::Status> GroupOverlaps(const std::vector<OperationSpec>& specs);

}  // namespace ucclzip::pipeline
