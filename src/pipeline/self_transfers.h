// Sends of a rank to itself and receives from itself. NCCL allows them in a group (an
// all-to-all made of sends and receives includes each rank's own share); they move nothing on
// a link. Within a group the k-th send to itself pairs with the k-th receive from itself, in
// call order, and the pair becomes one operation that copies the send's buffer into the
// receive's on the caller's stream; both calls' handles complete with it.
#pragma once

#include <vector>

#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {

// True for the spec of a Send to `rank` itself or of a Recv from it.
bool IsSelfTransfer(const OperationSpec& spec, int rank);
// IsSelfTransfer, or the copy that PairSelfTransfers made of a pair: the calls of a group that
// take no place on any link, before and after GroupEnd pairs them.
bool IsOrWasSelfTransfer(const OperationSpec& spec, int rank);

// Pairs a group's self transfers into copies, in place. A pair whose calls disagree (count,
// type, memory or stream) fails, both of its calls naming both; a call left without a partner
// fails naming what it lacks. Failed and absorbed calls leave `specs`; their handles are
// complete or complete with their pair's copy.
void PairSelfTransfers(std::vector<OperationSpec>& specs, int rank);

}  // namespace ucclzip::pipeline
