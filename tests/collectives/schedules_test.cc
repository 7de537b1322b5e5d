// The schedules of every algorithm, checked without processes: at every world size from 1 to
// 9, at larger ones as jobs over several nodes run them (WorldSizes), and at awkward counts, what each rank sends to a peer matches, step for step and element for
// element, what that peer expects from it, and forwarded or reduced sends name receives of
// the same count. Their link orders agree on both ends of every link, and a block is sent on
// at most the group of the link it arrived by of places after it arrived (the bound that keeps
// bounded receive slots from deadlocking, docs/COLLECTIVES.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "collectives/schedules.h"

namespace ucclzip::collectives {
namespace {

using pipeline::Schedule;

// Every size up to 9, and larger ones: powers of two (16, 32), one past (17) and one short (31)
// of them, and 12 (three nodes of four). The folds and unfolds of recursive doubling, the tree's
// levels and the chains' wrap-arounds all change at those edges.
const std::vector<int>& WorldSizes() {
  static const std::vector<int> sizes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 32};
  return sizes;
}

std::vector<Schedule> AllRanks(int world, const std::function<Schedule(int)>& build) {
  std::vector<Schedule> schedules;
  for (int r = 0; r < world; ++r) schedules.push_back(build(r));
  return schedules;
}

void ExpectLinksMatch(const std::vector<Schedule>& schedules, const std::string& what) {
  const int world = static_cast<int>(schedules.size());
  for (int a = 0; a < world; ++a) {
    for (const pipeline::SendStep& step : schedules[a].sends) {
      if (step.source != pipeline::SendStep::Source::kChunk) {
        ASSERT_GE(step.recv_step, 0) << what;
        EXPECT_EQ(schedules[a].recvs[step.recv_step].count, step.chunk.count) << what << " rank " << a;
      }
    }
    for (int b = 0; b < world; ++b) {
      std::vector<uint64_t> sent, expected;
      for (const auto& step : schedules[a].sends) {
        if (step.peer == b) sent.push_back(step.chunk.count);
      }
      for (const auto& step : schedules[b].recvs) {
        if (step.peer == a) expected.push_back(step.count);
      }
      EXPECT_EQ(sent, expected) << what << ": link " << a << " -> " << b;
    }
  }
}

TEST(Schedules, EveryLinkMatchesAtEveryWorldSize) {
  for (int world : WorldSizes()) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(world > 1 ? world - 1 : 1), uint64_t{1001}}) {
      const std::string what = absl::StrCat(world, " ranks, count ", count);
      ExpectLinksMatch(AllRanks(world, [&](int r) { return RingAllGather(r, world, count, false); }), "allgather " + what);
      ExpectLinksMatch(AllRanks(world, [&](int r) { return RingReduceScatter(r, world, count, ReduceOp::kSum, false); }),
                       "reducescatter " + what);
      ExpectLinksMatch(AllRanks(world, [&](int r) { return RingAllReduce(r, world, count, ReduceOp::kAvg, true); }),
                       "allreduce " + what);
      ExpectLinksMatch(
          AllRanks(world, [&](int r) { return RecursiveDoublingAllReduce(r, world, count, ReduceOp::kAvg, true); }),
          "recursive doubling allreduce " + what);
      for (int root = 0; root < world; ++root) {
        ExpectLinksMatch(AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, root, false); }),
                         absl::StrCat("broadcast root ", root, " ", what));
        ExpectLinksMatch(AllRanks(world, [&](int r) { return BinomialTreeBroadcast(r, world, count, root, false); }),
                         absl::StrCat("tree broadcast root ", root, " ", what));
        ExpectLinksMatch(AllRanks(world, [&](int r) { return ChainReduce(r, world, count, ReduceOp::kSum, root, false); }),
                         absl::StrCat("reduce root ", root, " ", what));
      }
    }
  }
}

// Every algorithm at every world size, for the block sizes below.
void ForEachAlgorithm(const std::function<void(const std::string&, const std::vector<Schedule>&)>& check) {
  for (int world : WorldSizes()) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1001}}) {
      const std::string what = absl::StrCat(world, " ranks, count ", count);
      check("allgather " + what, AllRanks(world, [&](int r) { return RingAllGather(r, world, count, false); }));
      check("reducescatter " + what,
            AllRanks(world, [&](int r) { return RingReduceScatter(r, world, count, ReduceOp::kSum, false); }));
      check("allreduce " + what, AllRanks(world, [&](int r) { return RingAllReduce(r, world, count, ReduceOp::kAvg, true); }));
      check("recursive doubling allreduce " + what,
            AllRanks(world, [&](int r) { return RecursiveDoublingAllReduce(r, world, count, ReduceOp::kAvg, false); }));
      for (int root = 0; root < world; ++root) {
        check(absl::StrCat("broadcast root ", root, " ", what),
              AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, root, false); }));
        check(absl::StrCat("tree broadcast root ", root, " ", what),
              AllRanks(world, [&](int r) { return BinomialTreeBroadcast(r, world, count, root, true); }));
        check(absl::StrCat("reduce root ", root, " ", what),
              AllRanks(world, [&](int r) { return ChainReduce(r, world, count, ReduceOp::kMax, root, false); }));
      }
    }
  }
}

// Where each block stands on a link, looked up in constant time: the links of 32 ranks with
// blocks of one element are too long to search for every block.
class LinkPlaces {
 public:
  explicit LinkPlaces(const std::vector<pipeline::StepBlock>& link) : size_(link.size()) {
    for (size_t i = 0; i < link.size(); ++i) {
      if (places_.size() <= static_cast<size_t>(link[i].step)) places_.resize(link[i].step + 1);
      std::vector<size_t>& blocks = places_[link[i].step];
      if (blocks.size() <= link[i].block) blocks.resize(link[i].block + 1, size_);
      blocks[link[i].block] = i;
    }
  }
  // The block's place, or the link's length where it is not on the link.
  size_t Of(pipeline::StepBlock block) const {
    if (block.step < 0 || static_cast<size_t>(block.step) >= places_.size()) return size_;
    const std::vector<size_t>& blocks = places_[block.step];
    return block.block < blocks.size() ? blocks[block.block] : size_;
  }

 private:
  size_t size_;
  std::vector<std::vector<size_t>> places_;  // [step][block]
};

// The engine gives pinned host frames, where forwarded blocks land, to one peer's receive slots
// only (pipeline::ForwardedPeer): every algorithm for large messages must forward what it
// receives from that peer. (The binomial tree forwards from its parent: where device memory is
// staged its small blocks go out through the device.)
TEST(Schedules, EveryForwardIsOfWhatThePredecessorSent) {
  for (int world : WorldSizes()) {
    for (int rank = 0; rank < world; ++rank) {
      std::vector<std::pair<std::string, Schedule>> schedules = {
          {"allgather", RingAllGather(rank, world, 1001, false)},
          {"reducescatter", RingReduceScatter(rank, world, 1001, ReduceOp::kSum, false)},
          {"allreduce", RingAllReduce(rank, world, 1001, ReduceOp::kSum, false)},
          {"recursive doubling allreduce", RecursiveDoublingAllReduce(rank, world, 1001, ReduceOp::kSum, false)}};
      for (int root = 0; root < world; ++root) {
        schedules.push_back({absl::StrCat("broadcast root ", root), ChainBroadcast(rank, world, 1001, root, false)});
        schedules.push_back({absl::StrCat("reduce root ", root), ChainReduce(rank, world, 1001, ReduceOp::kSum, root, false)});
      }
      for (const auto& [name, schedule] : schedules) {
        for (const pipeline::SendStep& step : schedule.sends) {
          if (step.source != pipeline::SendStep::Source::kForward) continue;
          EXPECT_EQ(schedule.recvs[step.recv_step].peer, pipeline::ForwardedPeer(rank, world))
              << name << ", rank " << rank << " of " << world;
        }
      }
    }
  }
}

TEST(LinkOrder, BothEndsOfEveryLinkNumberTheSameBlocks) {
  for (uint64_t block_elements : {1, 7, 1000}) {
    ForEachAlgorithm([&](const std::string& what, const std::vector<Schedule>& schedules) {
      const int world = static_cast<int>(schedules.size());
      std::vector<pipeline::LinkOrder> orders;
      for (int r = 0; r < world; ++r) orders.push_back(pipeline::LinkOrderOf(schedules[r], block_elements, world, r));
      for (int a = 0; a < world; ++a) {
        for (int b = 0; b < world; ++b) {
          // Block index and step count at each sequence, as the sender's envelope and the
          // receiver's check see them.
          std::vector<std::pair<uint32_t, uint64_t>> sent, expected;
          for (const pipeline::StepBlock& at : orders[a].sends[b]) {
            sent.emplace_back(at.block, schedules[a].sends[at.step].chunk.count);
          }
          for (const pipeline::StepBlock& at : orders[b].recvs[a]) {
            expected.emplace_back(at.block, schedules[b].recvs[at.step].count);
          }
          EXPECT_EQ(sent, expected) << what << ", blocks of " << block_elements << ": link " << a << " -> " << b;
        }
      }
    });
  }
}

// A send that reads a receive's block (a forward, a reduced block, or a chunk the receive
// wrote) takes its place on its link at most the group (pipeline::LinkGroupBlocks) of the link
// the block arrived by places after that block's place on that link; in rings, exactly that
// many once the chunks are long enough, so that the blocks after it are on their way while it
// is reduced or forwarded.
TEST(LinkOrder, BlocksAreSentOnAtMostAGroupAfterTheyArrive) {
  for (uint64_t block_elements : {1, 7, 1000}) {
    ForEachAlgorithm([&](const std::string& what, const std::vector<Schedule>& schedules) {
      const int world = static_cast<int>(schedules.size());
      for (int r = 0; r < world; ++r) {
        const Schedule& schedule = schedules[r];
        const pipeline::LinkOrder order = pipeline::LinkOrderOf(schedule, block_elements, world, r);
        std::vector<LinkPlaces> send_places, recv_places;
        for (int peer = 0; peer < world; ++peer) {
          send_places.emplace_back(order.sends[peer]);
          recv_places.emplace_back(order.recvs[peer]);
        }
        for (size_t s = 0; s < schedule.sends.size(); ++s) {
          const pipeline::SendStep& send = schedule.sends[s];
          if (send.recv_step < 0) continue;
          const int from = schedule.recvs[send.recv_step].peer;
          for (uint32_t b = 0; b < pipeline::BlockCount(send.chunk.count, block_elements); ++b) {
            const size_t sent = send_places[send.peer].Of({static_cast<int>(s), b});
            const size_t arrived = recv_places[from].Of({send.recv_step, b});
            ASSERT_LT(sent, order.sends[send.peer].size()) << what;
            ASSERT_LT(arrived, order.recvs[from].size()) << what;
            EXPECT_LE(sent, arrived + pipeline::LinkGroupBlocks(from, r, world)) << what << " rank " << r << " send step " << s << " block " << b;
            EXPECT_GE(sent, arrived) << what << " rank " << r << " send step " << s << " block " << b;
          }
        }
      }
    });
  }
  // 4 ranks, 4 blocks per chunk: every forward of the allgather leaves a relay link's group of
  // places after its block arrived.
  const Schedule gather = RingAllGather(1, 4, 4000, false);
  const pipeline::LinkOrder order = pipeline::LinkOrderOf(gather, 1000, 4, 1);
  const LinkPlaces to_next(order.sends[2]), from_previous(order.recvs[0]);
  for (int s = 1; s < 3; ++s) {
    for (uint32_t b = 0; b < 4; ++b) {
      EXPECT_EQ(to_next.Of({s, b}), from_previous.Of({s - 1, b}) + pipeline::kRelayLinkGroupBlocks)
          << "step " << s << " block " << b;
    }
  }
}

TEST(Schedules, RingsEncodeOnceAndForwardTheRest) {
  const int world = 5;
  const Schedule gather = RingAllGather(2, world, 10, false);
  ASSERT_EQ(gather.sends.size(), 4u);
  EXPECT_EQ(gather.sends[0].source, pipeline::SendStep::Source::kChunk);
  for (size_t s = 1; s < gather.sends.size(); ++s) EXPECT_EQ(gather.sends[s].source, pipeline::SendStep::Source::kForward);
  const Schedule reduce = RingAllReduce(2, world, 1003, ReduceOp::kSum, false);
  ASSERT_EQ(reduce.sends.size(), 8u);
  int encoded = 0;
  for (const auto& step : reduce.sends) encoded += step.source != pipeline::SendStep::Source::kForward;
  EXPECT_EQ(encoded, 5);  // the reduce-scatter half re-encodes at each hop, the allgather half once
  EXPECT_EQ(reduce.recvs[3].into->first, SplitEvenly(1003, world)[2].first);  // chunk 2 completes at rank 2
  EXPECT_EQ(RingReduceScatter(0, world, 7, ReduceOp::kAvg, false).recvs.back().divisor, 5u);
}

// The chain towards root 1 of 5 ranks is 2 -> 3 -> 4 -> 0 -> 1: the head sends its input, the
// middle ranks send what they combined, only the root writes its output (and divides for avg),
// and it answers the head.
TEST(Schedules, ReduceChainsTowardsTheRoot) {
  const int world = 5, root = 1;
  const Schedule head = ChainReduce(2, world, 77, ReduceOp::kAvg, root, false);
  ASSERT_EQ(head.sends.size(), 1u);
  EXPECT_EQ(head.sends[0].peer, 3);
  EXPECT_EQ(head.sends[0].source, pipeline::SendStep::Source::kChunk);
  ASSERT_EQ(head.recvs.size(), 1u);
  EXPECT_EQ(head.recvs[0].peer, root);
  EXPECT_EQ(head.recvs[0].count, 0u);
  for (int middle : {3, 4, 0}) {
    const Schedule schedule = ChainReduce(middle, world, 77, ReduceOp::kAvg, root, false);
    ASSERT_EQ(schedule.recvs.size(), 1u);
    EXPECT_EQ(schedule.recvs[0].peer, (middle + world - 1) % world);
    EXPECT_FALSE(schedule.recvs[0].into.has_value()) << middle;
    EXPECT_TRUE(schedule.recvs[0].reduce_with.has_value()) << middle;
    EXPECT_EQ(schedule.recvs[0].divisor, 1u);
    ASSERT_EQ(schedule.sends.size(), 1u);
    EXPECT_EQ(schedule.sends[0].source, pipeline::SendStep::Source::kReduced);
    EXPECT_EQ(schedule.sends[0].peer, (middle + 1) % world);
  }
  const Schedule at_root = ChainReduce(root, world, 77, ReduceOp::kAvg, root, true);
  ASSERT_EQ(at_root.recvs.size(), 1u);
  EXPECT_EQ(at_root.recvs[0].peer, 0);
  ASSERT_TRUE(at_root.recvs[0].into.has_value());
  EXPECT_EQ(at_root.recvs[0].into->buffer, pipeline::BufferRole::kOutput);
  EXPECT_EQ(at_root.recvs[0].divisor, 5u);
  EXPECT_TRUE(at_root.copies.empty());
  ASSERT_EQ(at_root.sends.size(), 1u);
  EXPECT_EQ(at_root.sends[0].peer, 2);
  EXPECT_EQ(at_root.sends[0].chunk.count, 0u);
  const Schedule alone = ChainReduce(0, 1, 77, ReduceOp::kAvg, 0, false);
  EXPECT_TRUE(alone.sends.empty() && alone.recvs.empty());
  EXPECT_EQ(alone.copies.size(), 1u);
}

// What a recursive-doubling allreduce computes, followed symbolically through every rank's
// schedule: the value each receive step writes is the multiset of inputs it combines (how
// often each rank's input is in it), how many times avg divided it, and how many messages deep
// it lies. The i-th send from a to b carries what the i-th receive of b from a gets.
struct SymbolicValue {
  std::vector<int> inputs;
  int divided = 0;
  int hops = 0;
};

std::vector<SymbolicValue> FollowRecursiveDoubling(int world, bool in_place) {
  std::vector<Schedule> schedules;
  for (int r = 0; r < world; ++r) schedules.push_back(RecursiveDoublingAllReduce(r, world, 10, ReduceOp::kAvg, in_place));
  std::vector<std::vector<std::optional<SymbolicValue>>> written(world);
  for (int r = 0; r < world; ++r) written[r].resize(schedules[r].recvs.size());
  auto input_of = [world](int r) {
    SymbolicValue value{std::vector<int>(world, 0)};
    value.inputs[r] = 1;
    return value;
  };
  // What rank a's send step s carries, or nullopt while the receive it reads is not written.
  auto sent = [&](int a, int s) -> std::optional<SymbolicValue> {
    const pipeline::SendStep& step = schedules[a].sends[s];
    if (step.chunk.buffer == pipeline::BufferRole::kInput) return input_of(a);
    return written[a][step.recv_step];
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int b = 0; b < world; ++b) {
      for (size_t k = 0; k < schedules[b].recvs.size(); ++k) {
        const pipeline::RecvStep& step = schedules[b].recvs[k];
        if (written[b][k]) continue;
        int nth = 0;  // which receive from this peer
        for (size_t j = 0; j < k; ++j) nth += schedules[b].recvs[j].peer == step.peer;
        int send = -1;
        for (size_t s = 0, seen = 0; s < schedules[step.peer].sends.size(); ++s) {
          if (schedules[step.peer].sends[s].peer == b && seen++ == static_cast<size_t>(nth)) send = static_cast<int>(s);
        }
        EXPECT_GE(send, 0) << "rank " << b << " receive " << k;
        if (send < 0) return {};
        std::optional<SymbolicValue> value = sent(step.peer, send);
        if (!value) continue;
        value->hops += 1;
        if (step.reduce_with) {
          const std::optional<SymbolicValue> local =
              step.reduce_with->buffer == pipeline::BufferRole::kInput && step.after_recv < 0
                  ? std::optional<SymbolicValue>(input_of(b))
                  : written[b][step.after_recv];
          if (!local) continue;
          for (int r = 0; r < world; ++r) value->inputs[r] += local->inputs[r];
          value->divided += local->divided;
          value->hops = std::max(value->hops, local->hops);
        }
        value->divided += step.divisor != 1;
        written[b][k] = value;
        moved = true;
      }
    }
  }
  std::vector<SymbolicValue> results;
  for (int r = 0; r < world; ++r) {
    // The output is what the last receive wrote (a single rank's is its own input).
    if (schedules[r].recvs.empty()) {
      results.push_back(input_of(r));
      continue;
    }
    EXPECT_TRUE(written[r].back().has_value()) << world << " ranks: rank " << r << " never finished";
    if (!written[r].back()) return {};
    results.push_back(*written[r].back());
  }
  return results;
}

// Every rank ends with every input exactly once, divided once (avg), at most log2(p) messages
// in a row from the inputs where the world is a power of two p, and at most two more where it
// is not (a fold before, an unfold after): 2 for 4 ranks, 3 or 4 for 5 to 7, where a ring
// takes 6 and 8 to 12.
TEST(Schedules, RecursiveDoublingCombinesEveryInputOnceInLogarithmicallyManyHops) {
  for (int world : WorldSizes()) {
    for (bool in_place : {false, true}) {
      const std::vector<SymbolicValue> results = FollowRecursiveDoubling(world, in_place);
      ASSERT_EQ(results.size(), static_cast<size_t>(world)) << world << " ranks";
      int powers = 1, levels = 0;
      while (powers * 2 <= world) powers *= 2, ++levels;
      int deepest = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(results[r].inputs, std::vector<int>(world, 1)) << world << " ranks, rank " << r;
        EXPECT_EQ(results[r].divided, world > 1 ? 1 : 0) << world << " ranks, rank " << r;
        deepest = std::max(deepest, results[r].hops);
      }
      if (powers == world) {
        EXPECT_EQ(deepest, levels) << world << " ranks";
      } else {
        EXPECT_GT(deepest, levels) << world << " ranks";
        EXPECT_LE(deepest, levels + 2) << world << " ranks";
      }
      if (world > 1) EXPECT_LT(deepest, 2 * (world - 1)) << world << " ranks: the ring's hops";
    }
  }
}

// The running result lives in the output: a receive that combines into it waits for the
// receive that wrote what it combines with, and for every send that reads that memory and is
// ordered neither after it (a send of receive j's result waits for receive j, and receives wait
// for each other in step order) nor before it (through the receives it waits for). A folded rank's unfold needs neither: the result
// cannot arrive before its partner has had all of this rank's send.
TEST(Schedules, RecursiveDoublingOrdersItsWritesAfterTheReadsOfTheSameMemory) {
  for (int world : {2, 3, 4, 6, 8, 16, 17}) {
    for (bool in_place : {false, true}) {
      for (int rank = 0; rank < world; ++rank) {
        const Schedule schedule = RecursiveDoublingAllReduce(rank, world, 100, ReduceOp::kSum, in_place);
        for (size_t k = 0; k < schedule.recvs.size(); ++k) {
          const pipeline::RecvStep& step = schedule.recvs[k];
          const std::string what = absl::StrCat(world, " ranks, rank ", rank, in_place ? " in place" : "", ", receive ", k);
          ASSERT_TRUE(step.into.has_value()) << what;
          if (!step.reduce_with) continue;
          if (step.reduce_with->buffer == pipeline::BufferRole::kOutput) EXPECT_EQ(step.after_recv, static_cast<int>(k) - 1) << what;
          // Sends that the receives this one waits for (after_recv, transitively) waited for.
          std::vector<int> finished_before;
          for (int j = step.after_recv; j >= 0; j = schedule.recvs[j].after_recv) {
            finished_before.push_back(schedule.recvs[j].after_send);
          }
          std::vector<int> unordered_readers;
          for (size_t s = 0; s < schedule.sends.size(); ++s) {
            const pipeline::SendStep& send = schedule.sends[s];
            const bool same_memory = send.chunk.buffer == pipeline::BufferRole::kOutput || in_place;
            const bool finished = std::count(finished_before.begin(), finished_before.end(), static_cast<int>(s)) > 0;
            if (same_memory && send.recv_step < static_cast<int>(k) && !finished) unordered_readers.push_back(static_cast<int>(s));
          }
          ASSERT_LE(unordered_readers.size(), 1u) << what;
          EXPECT_EQ(step.after_send, unordered_readers.empty() ? -1 : unordered_readers[0]) << what;
        }
      }
    }
  }
}

// Down the binomial tree from every root: each other rank receives the message once, from a
// rank that has it by then, at most ceil(log2 n) messages from the root; whoever forwards
// sends what it received; every rank that forwards nothing answers the root, which waits for
// each of them.
TEST(Schedules, TreeBroadcastReachesEveryRankInLogarithmicallyManyHops) {
  for (int world : WorldSizes()) {
    const int depth = world > 1 ? std::bit_width(static_cast<unsigned>(world - 1)) : 0;
    for (int root = 0; root < world; ++root) {
      const std::string what = absl::StrCat(world, " ranks, root ", root);
      const std::vector<Schedule> schedules =
          AllRanks(world, [&](int r) { return BinomialTreeBroadcast(r, world, 10, root, false); });
      std::vector<int> hops(world, -1);
      hops[root] = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < world; ++r) {
          if (hops[r] < 0) continue;
          for (const pipeline::SendStep& send : schedules[r].sends) {
            if (send.chunk.count == 0 || hops[send.peer] >= 0) continue;
            hops[send.peer] = hops[r] + 1;
            moved = true;
          }
        }
      }
      int leaves = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_GE(hops[r], 0) << what << ": rank " << r << " is never reached";
        EXPECT_LE(hops[r], depth) << what << ", rank " << r;
        if (r == root) continue;
        ASSERT_EQ(schedules[r].recvs.size(), 1u) << what << ", rank " << r;
        EXPECT_EQ(schedules[r].recvs[0].count, 10u) << what;
        int forwards = 0, answers = 0;
        for (const pipeline::SendStep& send : schedules[r].sends) {
          if (send.chunk.count == 0) {
            EXPECT_EQ(send.peer, root) << what << ", rank " << r;
            ++answers;
            continue;
          }
          ++forwards;
          EXPECT_EQ(send.source, pipeline::SendStep::Source::kForward) << what << ", rank " << r;
        }
        EXPECT_EQ(answers, forwards == 0 ? 1 : 0) << what << ", rank " << r;
        leaves += forwards == 0;
      }
      EXPECT_EQ(schedules[root].recvs.size(), static_cast<size_t>(leaves)) << what;
    }
  }
}

TEST(Schedules, SplitEvenlyCoversTheCountInOrder) {
  for (uint64_t count : {0ull, 1ull, 6ull, 7ull, 1000003ull}) {
    const std::vector<ChunkLayout> chunks = SplitEvenly(count, 7);
    uint64_t next = 0;
    for (const ChunkLayout& chunk : chunks) {
      EXPECT_EQ(chunk.first, next);
      EXPECT_LE(chunk.count, count / 7 + 1);
      next += chunk.count;
    }
    EXPECT_EQ(next, count);
  }
}

constexpr uint64_t kMiB = 1 << 20, kLargestBlock = 16 * kMiB, kSmallestBlock = 4 * kMiB;

// An operation of `count` elements of `width` bytes whose blocks cross `hops` links in a row,
// cut with the default largest and smallest block sizes, and the blocks it should get.
struct BlockCase {
  uint64_t count;
  size_t width;
  uint32_t hops;
  uint64_t block_bytes;
};

void ExpectBlocks(std::initializer_list<BlockCase> cases) {
  for (const BlockCase& c : cases) {
    EXPECT_EQ(pipeline::PipelineBlockElements(c.count, c.width, kLargestBlock, kSmallestBlock, c.hops),
              c.block_bytes / c.width)
        << c.count << " elements of " << c.width << " bytes over " << c.hops << " hops";
  }
}

// An operation under four largest blocks is cut into four (whole 64 KiB, whole elements), none
// below the smallest block size; from four largest blocks up, and wherever the smallest size is
// not below the largest, every block is the largest.
TEST(PipelineBlocks, SmallOperationsAreCutIntoFourBlocksOfAtLeastTheSmallestSize) {
  ExpectBlocks({
      {0, 2, 1, kSmallestBlock},                        // an empty operation: one block of the smallest size
      {1, 2, 1, kSmallestBlock},                        // below the smallest size: one block
      {8 * kMiB, 2, 1, 4 * kMiB},                       // 16 MB of bf16: four 4 MB blocks
      {5 * kMiB, 4, 1, 5 * kMiB},                       // 20 MB of fp32: four of 5 MB
      {17 * kMiB / 2 + 1, 2, 1, 4 * kMiB + (320 << 10)},  // a quarter of 17 MB and 2 bytes, up to whole 64 KiB
      {3 * kMiB, 1, 1, kSmallestBlock},                 // 3 MB: one block
      {6 * kMiB, 1, 1, kSmallestBlock},                 // 6 MB: a 4 MB block and a 2 MB one
      {32 * kMiB, 2, 1, kLargestBlock},                 // 64 MB: four of the largest
      {1ull << 40, 4, 1, kLargestBlock},                // 4 TB: the largest, with no overflow on the way
      {~0ull, 1, 1, kLargestBlock},
  });
  // Fixed blocks where the smallest size is not below the largest, as before it existed.
  for (uint64_t count : std::initializer_list<uint64_t>{0, 1, 1000003, 8 * kMiB, 1ull << 33}) {
    EXPECT_EQ(pipeline::PipelineBlockElements(count, 2, kLargestBlock, kLargestBlock), kLargestBlock / 2);
    EXPECT_EQ(pipeline::PipelineBlockElements(count, 2, 256 << 10, kSmallestBlock), (256 << 10) / 2);
  }
  // A block smaller than one element is one element.
  EXPECT_EQ(pipeline::PipelineBlockElements(100, 4, 1, 1), 1u);
}

// A chain of h hops is cut into 4 (h + 1) / 2 blocks, none below the smallest block size times
// 4 / that many: its last rank then waits h - 1 block times for a first block that is small.
TEST(PipelineBlocks, ChainsAreCutIntoMoreBlocksTheMoreHopsTheyHave) {
  ExpectBlocks({
      {8 * kMiB, 2, 1, 4 * kMiB},                // 16 MB of bf16, one hop: four blocks, as above
      {8 * kMiB, 2, 2, 3 * kMiB - (320 << 10)},  // two hops: six, each a sixth up to whole 64 KiB
      {8 * kMiB, 2, 3, 2 * kMiB},                // a chain of 4 ranks: eight blocks
      {8 * kMiB, 2, 7, 1 * kMiB},                // of 8 ranks: sixteen
      {8 * kMiB, 2, 31, kSmallestBlock / 16},    // of 32 ranks: 64, at the floor 4 MB * 4 / 64
      {kMiB, 2, 3, 2 * kMiB},                    // 2 MB along 4 ranks: one block of the floor, 2 MB
      {64 * kMiB, 2, 3, kLargestBlock},          // 128 MB: the largest blocks
      {128 * kMiB, 2, 31, 4 * kMiB},             // 256 MB along 32 ranks: 64 of 4 MB, not 16 largest
      {8 * kMiB, 2, 0, 4 * kMiB},                // no hops counts as one
  });
  // Fixed blocks stay fixed along a chain.
  EXPECT_EQ(pipeline::PipelineBlockElements(8 * kMiB, 2, kLargestBlock, kLargestBlock, 7), kLargestBlock / 2);
}

// Every rank of a chain derives the same hops, n - 1, so both ends of each link cut alike; the
// other algorithms' blocks cross one link at a time.
TEST(Schedules, ChainsCountTheirHopsOnEveryRank) {
  for (int world : WorldSizes()) {
    for (int rank = 0; rank < world; ++rank) {
      const uint32_t hops = static_cast<uint32_t>(std::max(world - 1, 1));
      for (int root = 0; root < world; ++root) {
        EXPECT_EQ(ChainBroadcast(rank, world, 1001, root, false).chain_hops, hops) << rank << " of " << world;
        EXPECT_EQ(ChainReduce(rank, world, 1001, ReduceOp::kSum, root, false).chain_hops, hops) << rank << " of " << world;
        EXPECT_EQ(BinomialTreeBroadcast(rank, world, 1001, root, false).chain_hops, 1u);
      }
      EXPECT_EQ(RingAllGather(rank, world, 1001, false).chain_hops, 1u);
      EXPECT_EQ(RingReduceScatter(rank, world, 1001, ReduceOp::kSum, false).chain_hops, 1u);
      EXPECT_EQ(RingAllReduce(rank, world, 1001, ReduceOp::kSum, false).chain_hops, 1u);
      EXPECT_EQ(RecursiveDoublingAllReduce(rank, world, 1001, ReduceOp::kSum, false).chain_hops, 1u);
    }
  }
}

}  // namespace
}  // namespace ucclzip::collectives
