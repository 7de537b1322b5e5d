#include "pipeline/send_window.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

TEST(SendWindow, BoundsEachPeerSeparately) {
  SendWindow window(3, 100);
  EXPECT_TRUE(window.TryTake(1, 60));
  EXPECT_TRUE(window.TryTake(1, 40));
  EXPECT_FALSE(window.TryTake(1, 1));  // full
  EXPECT_TRUE(window.TryTake(2, 100));  // another peer has its own room
  window.Release(1, 60);
  EXPECT_FALSE(window.TryTake(1, 61));
  EXPECT_TRUE(window.TryTake(1, 60));
}

TEST(SendWindow, ABlockLargerThanTheWindowGoesAlone) {
  SendWindow window(2, 100);
  EXPECT_TRUE(window.TryTake(1, 500));
  EXPECT_FALSE(window.TryTake(1, 1));
  window.Release(1, 500);
  EXPECT_TRUE(window.TryTake(1, 1));
  EXPECT_FALSE(window.TryTake(1, 500));
}

}  // namespace
}  // namespace ucclzip::pipeline
