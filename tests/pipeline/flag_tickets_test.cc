// The stream flags' tickets (flag_tickets.h) on the host: a flag is given out again only once its
// last waiter was released, so that no later operation's signal can release a waiter that is
// still pending, however many operations of however many communicators come and go meanwhile.
#include "pipeline/flag_tickets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace ucclzip::pipeline {
namespace {

TEST(FlagTickets, GivesEachFlagInTurnWithRisingTargets) {
  std::vector<uint32_t> flags(3, 0);
  FlagTickets tickets(flags.data(), 3);
  for (uint32_t round = 1; round <= 3; ++round) {
    for (uint32_t index = 0; index < 3; ++index) {
      const std::optional<FlagTicket> ticket = tickets.Take();
      ASSERT_TRUE(ticket.has_value());
      EXPECT_EQ(ticket->index, index);
      EXPECT_EQ(ticket->target, round);
      tickets.Signal(*ticket);
      EXPECT_EQ(flags[index], round);
    }
  }
}

// The defect this guards against: with the flags given out blindly in turn, the (count + 1)th
// ticket reused the first one's flag with a higher target, and its signal released the first
// waiter while its operation was still pending.
TEST(FlagTickets, AFlagWithAWaiterPendingIsSkippedUntilItIsReleased) {
  std::vector<uint32_t> flags(4, 0);
  FlagTickets tickets(flags.data(), 4);
  const FlagTicket pending = *tickets.Take();
  for (int i = 0; i < 100; ++i) {
    const std::optional<FlagTicket> ticket = tickets.Take();
    ASSERT_TRUE(ticket.has_value());
    ASSERT_NE(ticket->index, pending.index) << "the flag of a pending waiter was given out again at call " << i;
    tickets.Signal(*ticket);
    ASSERT_LT(flags[pending.index], pending.target) << "the pending waiter was released by another's signal";
  }
  tickets.Signal(pending);
  std::set<uint32_t> seen;
  for (int i = 0; i < 4; ++i) seen.insert(tickets.Take()->index);
  EXPECT_EQ(seen.size(), 4u) << "the released flag is given out again";
}

TEST(FlagTickets, EveryFlagPendingGivesNoTicketAndOneReleasedGivesItsFlag) {
  std::vector<uint32_t> flags(3, 0);
  FlagTickets tickets(flags.data(), 3);
  std::vector<FlagTicket> pending;
  for (int i = 0; i < 3; ++i) pending.push_back(*tickets.Take());
  EXPECT_FALSE(tickets.Take().has_value());
  tickets.Signal(pending[1]);
  const std::optional<FlagTicket> next = tickets.Take();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->index, pending[1].index);
  EXPECT_EQ(next->target, pending[1].target + 1);
  EXPECT_FALSE(tickets.Take().has_value());
}

// A signal that comes late (a target the flag has passed) leaves the flag where it is.
TEST(FlagTickets, SignalsOnlyRaise) {
  std::vector<uint32_t> flags(1, 0);
  FlagTickets tickets(flags.data(), 1);
  const FlagTicket first = *tickets.Take();
  tickets.Signal(first);
  const FlagTicket second = *tickets.Take();
  tickets.Signal(second);
  EXPECT_EQ(flags[0], 2u);
  tickets.Signal(first);
  EXPECT_EQ(flags[0], 2u) << "an earlier target lowered the flag";
}

TEST(FlagTickets, ConcurrentCallersNeverShareAPendingFlag) {
  constexpr uint32_t kFlags = 64;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<uint32_t> flags(kFlags, 0);
  FlagTickets tickets(flags.data(), kFlags);
  std::vector<uint8_t> held(kFlags, 0);  // one writer per flag at a time, if the tickets are right
  std::vector<std::thread> threads;
  std::atomic<int> shared{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        const std::optional<FlagTicket> ticket = tickets.Take();
        if (!ticket) continue;
        if (std::atomic_ref<uint8_t>(held[ticket->index]).exchange(1) != 0) shared.fetch_add(1);
        std::atomic_ref<uint8_t>(held[ticket->index]).store(0);
        tickets.Signal(*ticket);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(shared.load(), 0);
}

}  // namespace
}  // namespace ucclzip::pipeline
