#include "pipeline/send_window.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

TEST(SendWindow, BoundsEachPeerSeparately) {
  SendWindow window(3, 2, 50);
  EXPECT_TRUE(window.TryTake(1, 60));
  EXPECT_TRUE(window.TryTake(1, 40));
  EXPECT_FALSE(window.TryTake(1, 1));  // full
  EXPECT_TRUE(window.TryTake(2, 100));  // another peer has its own room
  window.Release(1, 60);
  EXPECT_FALSE(window.TryTake(1, 61));
  EXPECT_TRUE(window.TryTake(1, 60));
}

TEST(SendWindow, ABlockLargerThanTheWindowGoesAlone) {
  SendWindow window(2, 1, 100);
  EXPECT_TRUE(window.TryTake(1, 500));
  EXPECT_FALSE(window.TryTake(1, 1));
  window.Release(1, 500);
  EXPECT_TRUE(window.TryTake(1, 1));
  EXPECT_FALSE(window.TryTake(1, 500));
}

// A block of a message cut into several takes a largest block's room whatever its size, so the
// window holds as many of them as with the largest blocks; a message's only block its bytes.
TEST(SendWindow, ABlockOfSeveralTakesALargestBlocksRoom) {
  SendWindow window(2, 2, 16);
  EXPECT_EQ(window.RoomOf(4, true, false), 16u);
  EXPECT_EQ(window.RoomOf(20, true, false), 20u);
  EXPECT_EQ(window.RoomOf(4, false, false), 4u);
  EXPECT_TRUE(window.TryTake(1, window.RoomOf(4, true, false)));
  EXPECT_TRUE(window.TryTake(1, window.RoomOf(4, true, false)));
  EXPECT_FALSE(window.TryTake(1, window.RoomOf(4, true, false)));  // two of several, as two largest blocks
  EXPECT_FALSE(window.TryTake(1, window.RoomOf(1, false, false)));
  EXPECT_TRUE(window.TryTake(0, window.RoomOf(4, false, false)));
  EXPECT_TRUE(window.TryTake(0, window.RoomOf(4, false, false)));
  EXPECT_TRUE(window.TryTake(0, window.RoomOf(4, false, false)));  // small single blocks: many at once
}

// A chain's block goes alone: it waits until nothing is on its way to the peer, and nothing
// joins it until it is done, whatever its size.
TEST(SendWindow, AChainsBlockGoesAlone) {
  SendWindow window(2, 2, 16);
  EXPECT_EQ(window.RoomOf(4, true, true), 32u);
  EXPECT_EQ(window.RoomOf(40, true, true), 40u);
  EXPECT_TRUE(window.TryTake(1, window.RoomOf(4, true, false)));
  EXPECT_FALSE(window.TryTake(1, window.RoomOf(4, true, true)));  // something else is on its way
  window.Release(1, window.RoomOf(4, true, false));
  EXPECT_TRUE(window.TryTake(1, window.RoomOf(4, true, true)));
  EXPECT_FALSE(window.TryTake(1, window.RoomOf(1, false, false)));  // nothing joins it
  EXPECT_TRUE(window.TryTake(0, window.RoomOf(4, true, true)));   // another peer has its own room
}

}  // namespace
}  // namespace ucclzip::pipeline
