// Which device allocations may go to UCX directly: the first allocation seen at some addresses
// may, and so may it again; another allocation that overlaps it in any way may not. The
// driver's part (FindDeviceAllocation) runs in the device tests; this is the bookkeeping.
#include "transport/direct_allocations.h"

#include <gtest/gtest.h>

namespace ucclzip::transport {
namespace {

TEST(DirectAllocations, AdmitsAnAllocationAgainAndDisjointOnes) {
  DirectAllocations allocations;
  EXPECT_TRUE(allocations.Admit({.base = 0x1000, .size = 0x1000, .buffer_id = 1}));
  EXPECT_TRUE(allocations.Admit({.base = 0x1000, .size = 0x1000, .buffer_id = 1}));
  EXPECT_TRUE(allocations.Admit({.base = 0x2000, .size = 0x800, .buffer_id = 2}));  // touches, no overlap
  EXPECT_TRUE(allocations.Admit({.base = 0x800, .size = 0x800, .buffer_id = 3}));
  EXPECT_TRUE(allocations.Admit({.base = 0x1000, .size = 0x1000, .buffer_id = 1}));
}

TEST(DirectAllocations, RefusesEveryOverlapByAnotherAllocation) {
  DirectAllocations allocations;
  ASSERT_TRUE(allocations.Admit({.base = 0x10000, .size = 0x1000, .buffer_id = 7}));
  const DeviceAllocation recycled[] = {
      {.base = 0x10000, .size = 0x1000, .buffer_id = 8},  // the same addresses
      {.base = 0x10800, .size = 0x1000, .buffer_id = 9},  // starts inside
      {.base = 0xf800, .size = 0x1000, .buffer_id = 10},  // ends inside
      {.base = 0xf000, .size = 0x4000, .buffer_id = 11},  // spans it
      {.base = 0x10400, .size = 0x100, .buffer_id = 12},  // lies within
  };
  for (const DeviceAllocation& allocation : recycled) {
    EXPECT_FALSE(allocations.Admit(allocation)) << "buffer " << allocation.buffer_id;
  }
  // A refused allocation is not recorded: only the first one holds the addresses.
  EXPECT_FALSE(allocations.Admit({.base = 0x10000, .size = 0x1000, .buffer_id = 8}));
  EXPECT_TRUE(allocations.Admit({.base = 0x10000, .size = 0x1000, .buffer_id = 7}));
  EXPECT_TRUE(allocations.Admit({.base = 0x11000, .size = 0x1000, .buffer_id = 13}));
}

TEST(DirectAllocations, FindsTheLastAllocationBeforeAmongMany) {
  DirectAllocations allocations;
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(allocations.Admit({.base = 0x100000 + i * 0x10000, .size = 0x8000, .buffer_id = i + 1}));
  }
  EXPECT_FALSE(allocations.Admit({.base = 0x100000 + 50 * 0x10000 + 0x7fff, .size = 1, .buffer_id = 500}));
  EXPECT_TRUE(allocations.Admit({.base = 0x100000 + 50 * 0x10000 + 0x8000, .size = 0x8000, .buffer_id = 501}));
  EXPECT_FALSE(allocations.Admit({.base = 0x100000 + 60 * 0x10000 + 0x8000, .size = 0x8001, .buffer_id = 502}));
}

}  // namespace
}  // namespace ucclzip::transport
