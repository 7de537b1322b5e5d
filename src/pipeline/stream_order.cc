#include "pipeline/stream_order.h"

namespace ucclzip::pipeline {
namespace {

// This thread's open scopes and the calls they keep.
struct OpenScopes {
  int depth = 0;
  std::vector<std::shared_ptr<transport::Request>> kept;
};
thread_local OpenScopes scopes;

}  // namespace

ReturnWhenDoneScope::ReturnWhenDoneScope() { ++scopes.depth; }

ReturnWhenDoneScope::~ReturnWhenDoneScope() {
  if (--scopes.depth > 0) return;
  const std::vector<std::shared_ptr<transport::Request>> kept = std::move(scopes.kept);
  scopes.kept.clear();
  // As long as a held stream would wait: until each call is done, fails, or reaches its timeout.
  for (const std::shared_ptr<transport::Request>& request : kept) request->Wait(absl::InfiniteFuture()).IgnoreError();
}

bool ReturnWhenDoneScope::Keep(const std::vector<std::shared_ptr<transport::Request>>& requests) {
  if (scopes.depth == 0) return false;
  scopes.kept.insert(scopes.kept.end(), requests.begin(), requests.end());
  return true;
}

}  // namespace ucclzip::pipeline
