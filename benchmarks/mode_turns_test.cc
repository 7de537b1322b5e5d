// ModeOfTurn: every iteration runs every mode once, and across the seams between iterations
// every mode follows every mode (itself included) equally often.
#include "mode_turns.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace ucclzip::bench {
namespace {

TEST(ModeOfTurn, EveryModeFollowsEveryModeEquallyOften) {
  for (size_t modes = 1; modes <= 3; ++modes) {
    std::vector<size_t> order;
    constexpr size_t kIterations = 60;  // whole cycles of the one-, two- and three-mode orders
    for (size_t i = 0; i < kIterations; ++i) {
      std::set<size_t> seen;
      for (size_t turn = 0; turn < modes; ++turn) {
        const size_t m = ModeOfTurn(i, turn, modes);
        ASSERT_LT(m, modes);
        seen.insert(m);
        order.push_back(m);
      }
      EXPECT_EQ(seen.size(), modes) << "iteration " << i << " of " << modes << " modes";
    }
    std::map<std::pair<size_t, size_t>, int> follows;
    for (size_t k = 0; k < order.size(); ++k) ++follows[{order[k], order[(k + 1) % order.size()]}];
    ASSERT_EQ(follows.size(), modes * modes) << modes << " modes";
    for (const auto& [pair, count] : follows) {
      EXPECT_EQ(count, static_cast<int>(order.size() / (modes * modes)))
          << modes << " modes: " << pair.second << " after " << pair.first;
    }
  }
}

}  // namespace
}  // namespace ucclzip::bench
