#include "pipeline/group_overlaps.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

// A byte range [begin, end) of one of a call's buffers; empty where begin == end.
struct Span {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool empty() const { return begin >= end; }
  bool Overlaps(const Span& other) const {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
};

// What a call touches of its buffers: each buffer from the first to the last element any of
// its steps reads or writes there, and whether it writes one at all.
struct Touched {
  Span input;
  Span output;
  bool writes = false;
};

Touched TouchedBy(const OperationSpec& spec) {
  uint64_t first[2] = {std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max()}, end[2] = {0, 0};
  auto note = [&](const Chunk& chunk) {
    if (chunk.count == 0) return;
    const int role = chunk.buffer == BufferRole::kInput ? 0 : 1;
    first[role] = std::min(first[role], chunk.first);
    end[role] = std::max(end[role], chunk.first + chunk.count);
  };
  Touched touched;
  for (const SendStep& step : spec.schedule.sends) {
    if (step.source == SendStep::Source::kChunk) note(step.chunk);
  }
  for (const RecvStep& step : spec.schedule.recvs) {
    if (step.into) {
      note(*step.into);
      touched.writes |= step.into->count > 0;
    }
    if (step.reduce_with) note(*step.reduce_with);
  }
  for (const LocalCopy& copy : spec.schedule.copies) {
    note(copy.from);
    note(copy.to);
    touched.writes |= copy.to.count > 0;
  }
  const uint64_t width = ElementSize(spec.dtype);
  auto span = [&](const uint8_t* base, int role) {
    if (base == nullptr || end[role] == 0) return Span{};
    const auto at = reinterpret_cast<uintptr_t>(base);
    return Span{at + first[role] * width, at + end[role] * width};
  };
  touched.input = span(spec.input, 0);
  touched.output = span(spec.output, 1);
  return touched;
}

std::string Describe(const Span& span) {
  return absl::StrCat("[0x", absl::Hex(span.begin), ", +", span.end - span.begin, " B)");
}

}  // namespace

std::vector<absl::Status> GroupOverlaps(const std::vector<OperationSpec>& specs) {
  std::vector<absl::Status> conflicts(specs.size());
  if (specs.size() < 2) return conflicts;
  std::vector<Touched> touched;
  touched.reserve(specs.size());
  for (const OperationSpec& spec : specs) touched.push_back(TouchedBy(spec));
  constexpr const char* kWhy = ": the calls of a group run side by side, in no order";
  // Pairs of calls: groups are tens of calls, a weight sync's hundreds at most.
  for (size_t a = 0; a < specs.size(); ++a) {
    if (!touched[a].writes || !specs[a].refused.ok()) continue;
    for (size_t b = 0; b < specs.size(); ++b) {
      if (b == a || !specs[b].refused.ok()) continue;
      for (const Span& theirs : {touched[b].input, touched[b].output}) {
        if (!touched[a].output.Overlaps(theirs)) continue;
        conflicts[a].Update(absl::InvalidArgumentError(
            absl::StrCat("it writes ", Describe(touched[a].output), ", which \"",
                         specs[b].description, "\" of the same group uses at ", Describe(theirs), kWhy)));
        conflicts[b].Update(absl::InvalidArgumentError(
            absl::StrCat("it uses ", Describe(theirs), ", which \"", specs[a].description,
                         "\" of the same group writes at ", Describe(touched[a].output), kWhy)));
      }
    }
  }
  return conflicts;
}

}  // namespace ucclzip::pipeline
