// The engine's resource rules played out without processes or a GPU, for every algorithm: each
// rank's blocks move as operation_task.cc moves them (sends start in link order once their
// source has landed, within the send window and, for encodes of the caller's elements, a send
// slot; receives take a receive slot in link order once their envelope arrived and keep it
// until every send reading them is done), every block taking a slot as a device frame does
// (the worst case), with transfers completing in random orders and in the order that holds
// resources longest. With device_slots + kLinkGroupBlocks receive slots per peer, as the engine
// allocates, every schedule finishes; with kLinkGroupBlocks, one fewer than the bound of
// docs/COLLECTIVES.md, a ring deadlocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "collectives/schedules.h"

namespace ucclzip::collectives {
namespace {

using pipeline::LinkOrder;
using pipeline::Schedule;
using pipeline::SendStep;
using pipeline::StepBlock;

struct Limits {
  int window = 2;      // blocks on their way to one peer (device_slots)
  int send_slots = 2;  // per peer, for encodes of the caller's elements (device_slots)
  int recv_slots = 4;  // per peer (device_slots + kLinkGroupBlocks)
};

// How the next move is chosen among those possible.
enum class Order { kRandom, kHoldLongest };

class Simulation {
 public:
  Simulation(const std::vector<Schedule>& schedules, uint64_t block_elements, Limits limits)
      : schedules_(schedules), limits_(limits), world_(static_cast<int>(schedules.size())) {
    for (const Schedule& schedule : schedules) orders_.push_back(pipeline::LinkOrderOf(schedule, block_elements, world_));
    for (int r = 0; r < world_; ++r) {
      ranks_.emplace_back();
      Rank& rank = ranks_.back();
      rank.next_send.assign(world_, 0);
      rank.next_post.assign(world_, 0);
      rank.in_flight.assign(world_, 0);
      rank.send_slots.assign(world_, 0);
      rank.recv_slots.assign(world_, 0);
      for (int p = 0; p < world_; ++p) {
        rank.send_state.emplace_back(orders_[r].sends[p].size(), kWaiting);
        rank.recv_state.emplace_back(orders_[r].recvs[p].size(), kWaiting);
      }
    }
  }

  // Plays until every block is done (true) or nothing can move (false: a deadlock).
  bool Run(Order order, uint32_t seed) {
    std::mt19937 random(seed);
    for (;;) {
      RetireWhatCan();
      std::vector<std::function<void()>> grabs, completions;
      Moves(grabs, completions);
      // Holding longest: a transfer completes only when nothing else can take a resource.
      if (order == Order::kRandom || grabs.empty()) {
        for (auto& move : completions) grabs.push_back(std::move(move));
      }
      if (grabs.empty()) return AllDone();
      grabs[random() % grabs.size()]();
    }
  }

 private:
  enum State { kWaiting, kStarted, kLanded, kDone };
  struct Rank {
    std::vector<size_t> next_send, next_post;
    std::vector<int> in_flight, send_slots, recv_slots;
    std::vector<std::vector<State>> send_state;  // per peer, by link position
    std::vector<std::vector<State>> recv_state;  // kStarted: posted (slot held); kDone: retired
  };

  size_t RecvPosition(int r, int step, uint32_t block) const {
    const auto& link = orders_[r].recvs[schedules_[r].recvs[step].peer];
    return static_cast<size_t>(std::find(link.begin(), link.end(), StepBlock{step, block}) - link.begin());
  }

  void Moves(std::vector<std::function<void()>>& grabs, std::vector<std::function<void()>>& completions) {
    for (int r = 0; r < world_; ++r) {
      Rank& rank = ranks_[r];
      for (int p = 0; p < world_; ++p) {
        // The next send to p.
        const auto& sends = orders_[r].sends[p];
        if (size_t k = rank.next_send[p]; k < sends.size()) {
          const StepBlock at = sends[k];
          const SendStep& step = schedules_[r].sends[at.step];
          const bool encodes = step.source == SendStep::Source::kChunk;
          const bool source_ready =
              step.recv_step < 0 ||
              rank.recv_state[schedules_[r].recvs[step.recv_step].peer][RecvPosition(r, step.recv_step, at.block)] >= kLanded;
          if (source_ready && rank.in_flight[p] < limits_.window && (!encodes || rank.send_slots[p] < limits_.send_slots)) {
            grabs.push_back([&rank, p, k, encodes] {
              rank.send_state[p][k] = kStarted;
              ++rank.in_flight[p];
              if (encodes) ++rank.send_slots[p];
              ++rank.next_send[p];
            });
          }
        }
        // The next receive from p: its envelope is there once p started that send.
        const auto& recvs = orders_[r].recvs[p];
        if (size_t k = rank.next_post[p]; k < recvs.size()) {
          if (ranks_[p].send_state[r][k] >= kStarted && rank.recv_slots[p] < limits_.recv_slots) {
            grabs.push_back([&rank, p, k] {
              rank.recv_state[p][k] = kStarted;
              ++rank.recv_slots[p];
              ++rank.next_post[p];
            });
          }
        }
        // Transfers from r to p that both ends have posted.
        for (size_t k = 0; k < sends.size(); ++k) {
          if (rank.send_state[p][k] != kStarted || ranks_[p].recv_state[r][k] != kStarted) continue;
          const bool encodes = schedules_[r].sends[sends[k].step].source == SendStep::Source::kChunk;
          completions.push_back([this, &rank, r, p, k, encodes] {
            rank.send_state[p][k] = kDone;
            --rank.in_flight[p];
            if (encodes) --rank.send_slots[p];
            ranks_[p].recv_state[r][k] = kLanded;
          });
        }
      }
    }
  }

  // A landed block gives its slot back once every send that reads it is done.
  void RetireWhatCan() {
    for (int r = 0; r < world_; ++r) {
      for (int q = 0; q < world_; ++q) {
        for (size_t k = 0; k < orders_[r].recvs[q].size(); ++k) {
          if (ranks_[r].recv_state[q][k] != kLanded) continue;
          const StepBlock at = orders_[r].recvs[q][k];
          bool read = false;
          for (size_t s = 0; s < schedules_[r].sends.size(); ++s) {
            const SendStep& send = schedules_[r].sends[s];
            if (send.recv_step != at.step || send.source == SendStep::Source::kChunk) continue;
            const auto& link = orders_[r].sends[send.peer];
            const size_t position =
                static_cast<size_t>(std::find(link.begin(), link.end(), StepBlock{static_cast<int>(s), at.block}) - link.begin());
            read |= ranks_[r].send_state[send.peer][position] != kDone;
          }
          if (read) continue;
          ranks_[r].recv_state[q][k] = kDone;
          --ranks_[r].recv_slots[q];
        }
      }
    }
  }

  bool AllDone() const {
    for (const Rank& rank : ranks_) {
      for (const auto& link : rank.send_state) {
        for (State state : link) {
          if (state != kDone) return false;
        }
      }
      for (const auto& link : rank.recv_state) {
        for (State state : link) {
          if (state != kDone) return false;
        }
      }
    }
    return true;
  }

  const std::vector<Schedule>& schedules_;
  const Limits limits_;
  const int world_;
  std::vector<LinkOrder> orders_;
  std::vector<Rank> ranks_;
};

std::vector<Schedule> AllRanks(int world, const std::function<Schedule(int)>& build) {
  std::vector<Schedule> schedules;
  for (int r = 0; r < world; ++r) schedules.push_back(build(r));
  return schedules;
}

// Every algorithm at world sizes 2 to 6 with 5 to 7 blocks a chunk.
void ForEachCase(const std::function<void(const std::string&, const std::vector<Schedule>&)>& check) {
  for (int world = 2; world <= 6; ++world) {
    const uint64_t count = 61 * uint64_t(world);  // block_elements 10 below: 6 or 7 blocks a ring chunk
    const std::string what = absl::StrCat(world, " ranks");
    check("allgather " + what, AllRanks(world, [&](int r) { return RingAllGather(r, world, count / world, false); }));
    check("reducescatter " + what,
          AllRanks(world, [&](int r) { return RingReduceScatter(r, world, count / world, ReduceOp::kSum, false); }));
    check("allreduce " + what, AllRanks(world, [&](int r) { return RingAllReduce(r, world, count, ReduceOp::kSum, false); }));
    check("broadcast " + what, AllRanks(world, [&](int r) { return ChainBroadcast(r, world, count, 1 % world, false); }));
    check("reduce " + what, AllRanks(world, [&](int r) { return ChainReduce(r, world, count, ReduceOp::kSum, 0, false); }));
  }
}

constexpr uint64_t kBlockElements = 10;

TEST(LinkOrderSimulation, EveryScheduleFinishesWithTheEnginesSlots) {
  for (int device_slots : {1, 2, 3}) {
    const Limits limits{.window = device_slots,
                        .send_slots = device_slots,
                        .recv_slots = device_slots + static_cast<int>(pipeline::kLinkGroupBlocks)};
    ForEachCase([&](const std::string& what, const std::vector<Schedule>& schedules) {
      Simulation held(schedules, kBlockElements, limits);
      EXPECT_TRUE(held.Run(Order::kHoldLongest, 0)) << what << ", device_slots " << device_slots << ", resources held longest";
      for (uint32_t seed = 1; seed <= 5; ++seed) {
        Simulation random(schedules, kBlockElements, limits);
        EXPECT_TRUE(random.Run(Order::kRandom, seed)) << what << ", device_slots " << device_slots << ", seed " << seed;
      }
    });
  }
}

// The bound is tight: as many receive slots as the lag deadlock a ring, which is what makes the
// test above able to fail.
TEST(LinkOrderSimulation, ARingWithNoMoreSlotsThanTheLagDeadlocks) {
  const Limits tight{.window = 2, .send_slots = 2, .recv_slots = static_cast<int>(pipeline::kLinkGroupBlocks)};
  const std::vector<Schedule> gather = AllRanks(4, [](int r) { return RingAllGather(r, 4, 61, false); });
  Simulation simulation(gather, kBlockElements, tight);
  EXPECT_FALSE(simulation.Run(Order::kHoldLongest, 0));
}

}  // namespace
}  // namespace ucclzip::collectives
