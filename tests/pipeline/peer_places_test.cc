#include "pipeline/peer_places.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

TEST(PeerPlaces, BoundsEachPeerSeparately) {
  PeerPlaces places(3, 2);
  EXPECT_TRUE(places.TryTake(1));
  EXPECT_TRUE(places.TryTake(1));
  EXPECT_FALSE(places.TryTake(1));  // all taken
  EXPECT_TRUE(places.TryTake(2));   // another peer has its own places
  places.Release(1);
  EXPECT_TRUE(places.TryTake(1));
  EXPECT_FALSE(places.TryTake(1));
}

}  // namespace
}  // namespace ucclzip::pipeline
