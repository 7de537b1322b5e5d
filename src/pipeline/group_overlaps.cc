#include "pipeline/group_overlaps.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

// A byte range [begin, end) of one of a call's buffers.
struct Span {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  size_t call = 0;  // its index in the group
  bool writes = false;
};

// What `spec` touches of each of its buffers, chunk by chunk, the chunks it reads and those it
// writes each merged where they meet: an in-place allgather on a middle rank writes every chunk
// of its output but its own, which it only reads (one span from the first to the last element
// touched made it a writer of its own shard, and a Send of that shard in its group was refused
// on the middle ranks only, found by review in session 38).
void AddSpans(const OperationSpec& spec, size_t call, std::vector<Span>& spans) {
  const uint64_t width = ElementSize(spec.dtype);
  struct Touch {
    uint64_t first, end;
  };
  std::vector<Touch> touched[2][2];  // [input 0 / output 1][read 0 / written 1], in elements
  auto role = [](const Chunk& chunk) { return chunk.buffer == BufferRole::kInput ? 0 : 1; };
  auto base = [&](int r) { return r == 0 ? spec.input : spec.output; };
  auto note = [&](const Chunk& chunk, bool writes) {
    if (chunk.count > 0) touched[role(chunk)][writes].push_back({chunk.first, chunk.first + chunk.count});
  };
  for (const SendStep& step : spec.schedule.sends) {
    if (step.source == SendStep::Source::kChunk) note(step.chunk, false);
  }
  for (const RecvStep& step : spec.schedule.recvs) {
    if (step.into) note(*step.into, true);
    if (step.reduce_with) note(*step.reduce_with, false);
  }
  for (const LocalCopy& copy : spec.schedule.copies) {
    // A copy of a buffer onto itself (a transfer to this rank itself between one buffer)
    // changes nothing, and races with nothing.
    const uint8_t* from = base(role(copy.from));
    const uint8_t* to = base(role(copy.to));
    if (from != nullptr && from + copy.from.first * width == to + copy.to.first * width) continue;
    note(copy.from, false);
    note(copy.to, true);
  }
  for (int r = 0; r < 2; ++r) {
    if (base(r) == nullptr) continue;
    const auto at = reinterpret_cast<uintptr_t>(base(r));
    for (int writes = 0; writes < 2; ++writes) {
      std::vector<Touch>& list = touched[r][writes];
      std::sort(list.begin(), list.end(), [](const Touch& x, const Touch& y) { return x.first < y.first; });
      for (size_t i = 0; i < list.size();) {
        Touch merged = list[i];
        for (++i; i < list.size() && list[i].first <= merged.end; ++i) merged.end = std::max(merged.end, list[i].end);
        spans.push_back({at + merged.first * width, at + merged.end * width, call, writes == 1});
      }
    }
  }
}

// Among the spans seen so far, the two that reach furthest of two different calls: the furthest
// reach of any call other than a given one is then one of them.
class FurthestTwo {
 public:
  void Add(const Span& span) {
    if (span.call == first_.call && has_first_) {
      if (span.end > first_.end) first_ = span;
    } else if (has_second_ && span.call == second_.call) {
      if (span.end > second_.end) second_ = span;
      if (second_.end > first_.end) std::swap(first_, second_);
    } else if (!has_first_ || span.end > first_.end) {
      if (has_first_) {
        second_ = first_;
        has_second_ = true;
      }
      first_ = span;
      has_first_ = true;
    } else if (!has_second_ || span.end > second_.end) {
      second_ = span;
      has_second_ = true;
    }
  }
  // The span of another call than `call` that reaches past `begin`, if any.
  const Span* OtherReaching(size_t call, uintptr_t begin) const {
    const Span* other = has_first_ && first_.call != call ? &first_ : (has_second_ ? &second_ : nullptr);
    return other != nullptr && other->end > begin ? other : nullptr;
  }

 private:
  Span first_, second_;
  bool has_first_ = false, has_second_ = false;
};

std::string Describe(const Span& span) {
  return absl::StrCat("[0x", absl::Hex(span.begin), ", +", span.end - span.begin, " B)");
}

}  // namespace

std::vector<absl::Status> GroupOverlaps(const std::vector<OperationSpec>& specs) {
  std::vector<absl::Status> conflicts(specs.size());
  if (specs.size() < 2) return conflicts;
  std::vector<Span> spans;
  for (size_t call = 0; call < specs.size(); ++call) {
    if (specs[call].refused.ok()) AddSpans(specs[call], call, spans);
  }
  // One sweep in address order (groups of a weight sync hold many thousands of calls): a span
  // overlaps an earlier one exactly where that one reaches past its start. Every call in a
  // conflict is flagged at least once, each naming one call it races with.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  auto refuse = [&](const Span& mine, const Span& theirs) {
    constexpr const char* kWhy = ": the calls of a group run side by side, in no order";
    for (const auto& [a, b] : {std::pair{&mine, &theirs}, std::pair{&theirs, &mine}}) {
      if (!conflicts[a->call].ok()) continue;
      conflicts[a->call] = absl::InvalidArgumentError(absl::StrCat(
          "it ", a->writes ? "writes " : "reads ", Describe(*a), ", which \"", specs[b->call].description,
          "\" of the same group ", b->writes ? "writes" : "reads", " at ", Describe(*b), kWhy));
    }
  };
  FurthestTwo writes, any;
  for (const Span& span : spans) {
    if (const Span* writer = writes.OtherReaching(span.call, span.begin)) refuse(span, *writer);
    if (span.writes) {
      if (const Span* other = any.OtherReaching(span.call, span.begin)) refuse(span, *other);
      writes.Add(span);
    }
    any.Add(span);
  }
  return conflicts;
}

}  // namespace ucclzip::pipeline
