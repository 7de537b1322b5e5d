// The engine's resource rules played out without processes or a GPU, for every algorithm: each
// rank's blocks move as operation_task.cc moves them (sends start in link order once their
// source has landed, within the send window and, for encodes of the caller's elements, a send
// slot; a frame may start encoding ahead of the window and takes the window later, in link
// order; receives take a receive slot in link order once their envelope arrived and keep it
// until every send reading them is done), every block taking a slot as a device frame does
// (the worst case), with transfers completing in random orders and in the order that holds
// resources longest. With the engine's slots (device_slots + kEncodeAheadBlocks send slots per
// peer, and device_slots + the link's group receive slots: pipeline::LinkGroupBlocks) every
// schedule finishes, alone or with others in one group (calls taking their turns on each link);
// with as many receive slots as the link's group, one fewer than the bound of
// docs/COLLECTIVES.md, a ring deadlocks, and so does a group whose calls do not take turns.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "collectives/schedules.h"
#include "pipeline/send_window.h"

namespace ucclzip::collectives {
namespace {

using pipeline::LinkOrder;
using pipeline::Schedule;
using pipeline::SendStep;
using pipeline::StepBlock;

struct Limits {
  int window = 2;      // blocks on their way to one peer (device_slots)
  int send_slots = 2;  // per peer, for encodes of the caller's elements (device_slots)
  // Per peer, beyond the group of the link from it (pipeline::LinkGroupBlocks): device_slots.
  int recv_slots_beyond_group = 2;
  // Nonzero: every peer this many receive slots instead, whatever the link's group (as the
  // engine gave every peer device_slots + kLinkGroupBlocks before relay links took groups of 4).
  int recv_slots_every_peer = 0;
  // Calls in flight at once take their turns on each link in call order (as the engine does).
  bool in_call_order = true;
  // Frames start encoding while the window is full, in the send slots beyond it (as the
  // engine does), and take the window later in link order; the envelope goes with the window.
  bool encode_ahead = false;
};

// What the engine allocates and allows for a given device_slots.
Limits EngineLimits(int device_slots) {
  return Limits{.window = device_slots,
                .send_slots = device_slots + pipeline::kEncodeAheadBlocks,
                .recv_slots_beyond_group = device_slots,
                .encode_ahead = true};
}

// How the next move is chosen among those possible.
enum class Order { kRandom, kHoldLongest };

// Operations in flight at once (a group: each its own task) share each rank's slots and send
// windows; each keeps its own link order.
class Simulation {
 public:
  // operations[o][r]: rank r's schedule of operation o.
  Simulation(const std::vector<std::vector<Schedule>>& operations, uint64_t block_elements, Limits limits)
      : limits_(limits), world_(static_cast<int>(operations.front().size())) {
    for (int r = 0; r < world_; ++r) {
      ranks_.emplace_back();
      Rank& rank = ranks_.back();
      rank.in_flight.assign(world_, 0);
      rank.send_slots.assign(world_, 0);
      rank.recv_slots.assign(world_, 0);
    }
    for (const std::vector<Schedule>& schedules : operations) {
      ops_.emplace_back();
      Op& op = ops_.back();
      op.schedules = schedules;
      for (int r = 0; r < world_; ++r) {
        op.orders.push_back(pipeline::LinkOrderOf(schedules[r], block_elements, world_, r));
        op.ranks.emplace_back();
        OpRank& state = op.ranks.back();
        state.next_send.assign(world_, 0);
        state.next_window.assign(world_, 0);
        state.next_post.assign(world_, 0);
        for (int p = 0; p < world_; ++p) {
          state.send_state.emplace_back(op.orders[r].sends[p].size(), kWaiting);
          state.recv_state.emplace_back(op.orders[r].recvs[p].size(), kWaiting);
        }
      }
    }
  }
  Simulation(const std::vector<Schedule>& schedules, uint64_t block_elements, Limits limits)
      : Simulation(std::vector<std::vector<Schedule>>{schedules}, block_elements, limits) {}

  // Plays until every block is done (true) or nothing can move (false: a deadlock).
  bool Run(Order order, uint32_t seed) {
    std::mt19937 random(seed);
    for (;;) {
      RetireWhatCan();
      std::vector<std::function<void()>> grabs, completions;
      for (size_t o = 0; o < ops_.size(); ++o) Moves(o, grabs, completions);
      // Holding longest: a transfer completes only when nothing else can take a resource.
      if (order == Order::kRandom || grabs.empty()) {
        for (auto& move : completions) grabs.push_back(std::move(move));
      }
      if (grabs.empty()) return AllDone();
      grabs[random() % grabs.size()]();
    }
  }

 private:
  // Rank r's receive slots for blocks from peer p, as the engine allocates them.
  int RecvSlots(int p, int r) const {
    if (limits_.recv_slots_every_peer > 0) return limits_.recv_slots_every_peer;
    return limits_.recv_slots_beyond_group + static_cast<int>(pipeline::LinkGroupBlocks(p, r, world_));
  }
  // kAhead: a frame encoding ahead of the window (its send slot held, its envelope not sent).
  enum State { kWaiting, kAhead, kStarted, kLanded, kDone };
  // A rank's resources, shared by the operations.
  struct Rank {
    std::vector<int> in_flight, send_slots, recv_slots;
  };
  // One operation on one rank.
  struct OpRank {
    std::vector<size_t> next_send, next_window, next_post;
    std::vector<std::vector<State>> send_state;  // per peer, by link position
    std::vector<std::vector<State>> recv_state;  // kStarted: posted (slot held); kDone: retired
  };
  struct Op {
    std::vector<Schedule> schedules;  // per rank
    std::vector<LinkOrder> orders;
    std::vector<OpRank> ranks;
  };

  static size_t PositionOf(const std::vector<StepBlock>& link, StepBlock at) {
    return static_cast<size_t>(std::find(link.begin(), link.end(), at) - link.begin());
  }

  // Whether every operation before `o` has started all its sends to p (posted all its receives
  // from p) on rank r: a link's blocks start in call order across operations.
  bool EarlierStarted(size_t o, int r, int p, bool sends) const {
    for (size_t e = 0; limits_.in_call_order && e < o; ++e) {
      const OpRank& theirs = ops_[e].ranks[r];
      const auto& link = sends ? ops_[e].orders[r].sends[p] : ops_[e].orders[r].recvs[p];
      if ((sends ? theirs.next_window[p] : theirs.next_post[p]) < link.size()) return false;
    }
    return true;
  }

  void Moves(size_t o, std::vector<std::function<void()>>& grabs, std::vector<std::function<void()>>& completions) {
    Op& op = ops_[o];
    for (int r = 0; r < world_; ++r) {
      const Schedule& schedule = op.schedules[r];
      Rank& rank = ranks_[r];
      OpRank& mine = op.ranks[r];
      for (int p = 0; p < world_; ++p) {
        // The next frame encoded ahead takes the window.
        const auto& sends = op.orders[r].sends[p];
        if (size_t k = mine.next_window[p]; k < mine.next_send[p] && rank.in_flight[p] < limits_.window) {
          grabs.push_back([&rank, &mine, p, k] {
            mine.send_state[p][k] = kStarted;
            ++rank.in_flight[p];
            ++mine.next_window[p];
          });
        }
        // The next send to p: within the window, or a frame ahead of it.
        if (size_t k = mine.next_send[p]; k < sends.size() && EarlierStarted(o, r, p, true)) {
          const StepBlock at = sends[k];
          const SendStep& step = schedule.sends[at.step];
          const bool encodes = step.source == SendStep::Source::kChunk;
          const int from = step.recv_step < 0 ? 0 : schedule.recvs[step.recv_step].peer;
          // A forward or a re-encode reads the landed block (which keeps its slot until then); a
          // chunk waits until the receive that writes it has finished.
          const State needed = step.source == SendStep::Source::kChunk ? kDone : kLanded;
          const bool source_ready =
              step.recv_step < 0 ||
              mine.recv_state[from][PositionOf(op.orders[r].recvs[from], {step.recv_step, at.block})] >= needed;
          const bool slot = !encodes || rank.send_slots[p] < limits_.send_slots;
          const bool windowed = mine.next_window[p] == k && rank.in_flight[p] < limits_.window;
          const bool ahead = limits_.encode_ahead && step.source != SendStep::Source::kForward;
          if (source_ready && slot && (windowed || ahead)) {
            grabs.push_back([&rank, &mine, p, k, encodes, windowed] {
              mine.send_state[p][k] = windowed ? kStarted : kAhead;
              if (windowed) ++rank.in_flight[p], ++mine.next_window[p];
              if (encodes) ++rank.send_slots[p];
              ++mine.next_send[p];
            });
          }
        }
        // The next receive from p: its envelope is there once p started that send.
        const auto& recvs = op.orders[r].recvs[p];
        if (size_t k = mine.next_post[p]; k < recvs.size() && EarlierStarted(o, r, p, false)) {
          if (op.ranks[p].send_state[r][k] >= kStarted && rank.recv_slots[p] < RecvSlots(p, r)) {
            grabs.push_back([&rank, &mine, p, k] {
              mine.recv_state[p][k] = kStarted;
              ++rank.recv_slots[p];
              ++mine.next_post[p];
            });
          }
        }
        // Transfers from r to p that both ends have posted.
        for (size_t k = 0; k < sends.size(); ++k) {
          if (mine.send_state[p][k] != kStarted || op.ranks[p].recv_state[r][k] != kStarted) continue;
          const bool encodes = schedule.sends[sends[k].step].source == SendStep::Source::kChunk;
          completions.push_back([&rank, &mine, &theirs = op.ranks[p], r, p, k, encodes] {
            mine.send_state[p][k] = kDone;
            --rank.in_flight[p];
            if (encodes) --rank.send_slots[p];
            theirs.recv_state[r][k] = kLanded;
          });
        }
      }
    }
  }

  // A landed block gives its slot back once every send that reads it is done, and once it could
  // be combined: the blocks its step waits for (RecvStep::after_recv, after_send) are done.
  void RetireWhatCan() {
    for (Op& op : ops_) {
      for (int r = 0; r < world_; ++r) {
        const Schedule& schedule = op.schedules[r];
        OpRank& mine = op.ranks[r];
        for (int q = 0; q < world_; ++q) {
          for (size_t k = 0; k < op.orders[r].recvs[q].size(); ++k) {
            if (mine.recv_state[q][k] != kLanded) continue;
            const StepBlock at = op.orders[r].recvs[q][k];
            bool read = false;
            for (size_t s = 0; s < schedule.sends.size(); ++s) {
              const SendStep& send = schedule.sends[s];
              if (send.recv_step != at.step || send.source == SendStep::Source::kChunk) continue;
              const size_t position = PositionOf(op.orders[r].sends[send.peer], {static_cast<int>(s), at.block});
              read |= mine.send_state[send.peer][position] != kDone;
            }
            if (read) continue;
            const pipeline::RecvStep& step = schedule.recvs[at.step];
            if (step.after_recv >= 0) {
              const int from = schedule.recvs[step.after_recv].peer;
              if (mine.recv_state[from][PositionOf(op.orders[r].recvs[from], {step.after_recv, at.block})] != kDone) continue;
            }
            if (step.after_send >= 0) {
              const int to = schedule.sends[step.after_send].peer;
              if (mine.send_state[to][PositionOf(op.orders[r].sends[to], {step.after_send, at.block})] != kDone) continue;
            }
            mine.recv_state[q][k] = kDone;
            --ranks_[r].recv_slots[q];
          }
        }
      }
    }
  }

  bool AllDone() const {
    for (const Op& op : ops_) {
      for (const OpRank& mine : op.ranks) {
        for (const auto* states : {&mine.send_state, &mine.recv_state}) {
          for (const auto& link : *states) {
            for (State state : link) {
              if (state != kDone) return false;
            }
          }
        }
      }
    }
    return true;
  }

  const Limits limits_;
  const int world_;
  std::vector<Rank> ranks_;
  std::vector<Op> ops_;
};

std::vector<Schedule> AllRanks(int world, const std::function<Schedule(int)>& build) {
  std::vector<Schedule> schedules;
  for (int r = 0; r < world; ++r) schedules.push_back(build(r));
  return schedules;
}

// Every algorithm at world sizes 2 to 6 with 5 to 7 blocks a chunk, and at 8, 9, 16 and 17
// (where recursive doubling starts and stops folding, and the tree gains a level) with 3, one
// more than a link group: each move of the simulation looks at every block, so its time grows
// with the square of their number.
void ForEachCase(const std::function<void(const std::string&, const std::vector<Schedule>&)>& check) {
  for (int world : {2, 3, 4, 5, 6, 8, 9, 16, 17}) {
    // block_elements 10 below: 6 or 7 blocks a ring chunk, or 3 from 8 ranks on.
    const uint64_t count = (world <= 6 ? 61 : 21) * uint64_t(world);
    const std::string what = absl::StrCat(world, " ranks");
    check("allgather " + what, AllRanks(world, [&](int r) { return RingAllGather(r, world, count / world, false); }));
    check("reducescatter " + what,
          AllRanks(world, [&](int r) { return RingReduceScatter(r, world, count / world, ReduceOp::kSum, false); }));
    check("allreduce " + what, AllRanks(world, [&](int r) { return RingAllReduce(r, world, count, ReduceOp::kSum, false); }));
    for (bool in_place : {false, true}) {
      check(absl::StrCat("recursive doubling allreduce ", what, in_place ? " in place" : ""),
            AllRanks(world, [&](int r) { return RecursiveDoublingAllReduce(r, world, count, ReduceOp::kSum, in_place); }));
    }
    check("broadcast " + what, AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, 1 % world, false); }));
    check("tree broadcast " + what,
          AllRanks(world, [&](int r) { return BinomialTreeBroadcast(r, world, count, 1 % world, false); }));
    check("reduce " + what, AllRanks(world, [&](int r) { return ChainReduce(r, world, count, ReduceOp::kSum, 0, false); }));
  }
}

constexpr uint64_t kBlockElements = 10;

TEST(LinkOrderSimulation, EveryScheduleFinishesWithTheEnginesSlots) {
  for (int device_slots : {1, 2, 3, 4}) {
    const Limits limits = EngineLimits(device_slots);
    ForEachCase([&](const std::string& what, const std::vector<Schedule>& schedules) {
      Simulation held(schedules, kBlockElements, limits);
      EXPECT_TRUE(held.Run(Order::kHoldLongest, 0)) << what << ", device_slots " << device_slots << ", resources held longest";
      for (uint32_t seed = 1; seed <= (schedules.size() <= 6 ? 5u : 2u); ++seed) {
        Simulation random(schedules, kBlockElements, limits);
        EXPECT_TRUE(random.Run(Order::kRandom, seed)) << what << ", device_slots " << device_slots << ", seed " << seed;
      }
    });
  }
}

// Groups: several collectives in flight at once, each its own task, sharing every rank's slots.
TEST(LinkOrderSimulation, GroupsOfCollectivesFinishWithTheEnginesSlots) {
  for (int device_slots : {1, 2}) {
    const Limits limits = EngineLimits(device_slots);
    for (int world = 3; world <= 5; ++world) {
      const uint64_t count = 61 * uint64_t(world);
      const auto gather = AllRanks(world, [&](int r) { return RingAllGather(r, world, count / world, false); });
      const auto reduce = AllRanks(world, [&](int r) { return RingAllReduce(r, world, count, ReduceOp::kSum, false); });
      const auto scatter =
          AllRanks(world, [&](int r) { return RingReduceScatter(r, world, count / world, ReduceOp::kSum, false); });
      const auto cast0 = AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, 0, false); });
      const auto cast1 = AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, 1, false); });
      const auto doubling =
          AllRanks(world, [&](int r) { return RecursiveDoublingAllReduce(r, world, count, ReduceOp::kSum, false); });
      std::vector<std::pair<std::string, std::vector<std::vector<Schedule>>>> groups = {
          {"allgather, allgather", {gather, gather}},
          {"allreduce, allgather", {reduce, gather}},
          {"reducescatter, allreduce, allgather", {scatter, reduce, gather}},
          {"broadcast from 0, broadcast from 1", {cast0, cast1}},
          {"broadcast from 1, allreduce", {cast1, reduce}},
          {"recursive doubling allreduce, allgather, recursive doubling allreduce", {doubling, gather, doubling}},
          {"allreduce, recursive doubling allreduce", {reduce, doubling}},
          {"tree broadcast from 0, allgather, broadcast from 1",
           {AllRanks(world, [&](int r) { return BinomialTreeBroadcast(r, world, count, 0, false); }), gather, cast1}},
      };
      // Point-to-point calls in the same groups: a weight sync from rank 0 to every other rank
      // beside an allgather, and a shift (each rank to the next) beside an allreduce.
      auto message = [&](int from, int to, uint64_t elements) {
        return AllRanks(world, [&](int r) {
          if (r == from) return SendSchedule(to, elements);
          if (r == to) return RecvSchedule(from, elements);
          return Schedule{};
        });
      };
      std::vector<std::vector<Schedule>> sync{gather};
      for (int to = 1; to < world; ++to) sync.insert(sync.begin() + (to - 1), message(0, to, 3 * count));
      std::vector<std::vector<Schedule>> shift;
      for (int from = 0; from < world; ++from) shift.push_back(message(from, (from + 1) % world, count));
      shift.push_back(reduce);
      groups.push_back({"a weight sync from rank 0, allgather", sync});
      groups.push_back({"a shift, allreduce", shift});
      for (const auto& [what, operations] : groups) {
        const std::string where = absl::StrCat(what, ", ", world, " ranks, device_slots ", device_slots);
        Simulation held(operations, kBlockElements, limits);
        EXPECT_TRUE(held.Run(Order::kHoldLongest, 0)) << where << ", resources held longest";
        for (uint32_t seed = 1; seed <= 5; ++seed) {
          Simulation random(operations, kBlockElements, limits);
          EXPECT_TRUE(random.Run(Order::kRandom, seed)) << where << ", seed " << seed;
        }
      }
    }
  }
}

// Without the call order across them, the calls of a group take each other's slots.
TEST(LinkOrderSimulation, AGroupWithoutCallOrderDeadlocks) {
  Limits limits{.window = 1, .send_slots = 1, .recv_slots_beyond_group = 1};
  limits.in_call_order = false;
  const auto gather = AllRanks(4, [](int r) { return RingAllGather(r, 4, 61, false); });
  Simulation simulation({gather, gather}, kBlockElements, limits);
  EXPECT_FALSE(simulation.Run(Order::kHoldLongest, 0));
}

// The bound is tight: as many receive slots as the lag deadlock a ring, which is what makes the
// test above able to fail.
TEST(LinkOrderSimulation, ARingWithNoMoreSlotsThanTheLagDeadlocks) {
  const std::vector<Schedule> gather = AllRanks(4, [](int r) { return RingAllGather(r, 4, 61, false); });
  for (bool encode_ahead : {false, true}) {
    Limits tight = EngineLimits(2);
    tight.recv_slots_beyond_group = 0;
    tight.encode_ahead = encode_ahead;
    Simulation simulation(gather, kBlockElements, tight);
    EXPECT_FALSE(simulation.Run(Order::kHoldLongest, 0)) << "encode ahead " << encode_ahead;
  }
}

// The predecessor's extra slots are needed: with device_slots + kLinkGroupBlocks receive slots
// from every peer (what the engine gave before relay links took groups of
// kRelayLinkGroupBlocks), no more than a relay link's group for device_slots 1 and 2, every ring
// of 3 ranks or more deadlocks.
TEST(LinkOrderSimulation, RelayLinksNeedMoreSlotsThanOtherLinks) {
  for (int device_slots : {1, 2}) {
    for (int world = 3; world <= 5; ++world) {
      const auto gather = AllRanks(world, [&](int r) { return RingAllGather(r, world, 61, false); });
      const auto scatter = AllRanks(world, [&](int r) { return RingReduceScatter(r, world, 61, ReduceOp::kSum, false); });
      for (const auto& [what, schedules] : {std::pair{"allgather", gather}, std::pair{"reducescatter", scatter}}) {
        Limits uniform = EngineLimits(device_slots);
        uniform.recv_slots_every_peer = device_slots + static_cast<int>(pipeline::kLinkGroupBlocks);
        ASSERT_LE(uniform.recv_slots_every_peer, static_cast<int>(pipeline::LinkGroupBlocks(world - 1, 0, world)));
        Simulation simulation(schedules, kBlockElements, uniform);
        EXPECT_FALSE(simulation.Run(Order::kHoldLongest, 0))
            << what << ", " << world << " ranks, device_slots " << device_slots;
      }
    }
  }
}

}  // namespace
}  // namespace ucclzip::collectives
