#include "transport/message_tag.h"

#include <gtest/gtest.h>

namespace ucclzip::transport {
namespace {

TEST(MessageTag, EveryFieldSurvivesPackAndUnpack) {
  MessageTag tag{0xab, kMaxRanks - 1, OpTag{kMaxSequence, kMaxStream}, true, kMaxBlocks - 1};
  MessageTag back = MessageTag::Unpack(tag.Pack());
  EXPECT_EQ(back.communicator, 0xab);
  EXPECT_EQ(back.sender, uint32_t{kMaxRanks - 1});
  EXPECT_EQ(back.op.sequence, kMaxSequence);
  EXPECT_EQ(back.op.stream, kMaxStream);
  EXPECT_TRUE(back.last);
  EXPECT_EQ(back.block, kMaxBlocks - 1);
}

TEST(MessageTag, FieldsDoNotOverlap) {
  // Setting one field to all ones leaves every other field zero.
  const MessageTag singles[] = {
      {0xff, 0, {}, false, 0}, {0, kMaxRanks - 1, {}, false, 0}, {0, 0, {kMaxSequence, 0}, false, 0},
      {0, 0, {0, kMaxStream}, false, 0}, {0, 0, {}, true, 0}, {0, 0, {}, false, kMaxBlocks - 1}};
  uint64_t seen = 0;
  for (const MessageTag& tag : singles) {
    uint64_t bits = tag.Pack();
    EXPECT_NE(bits, 0u);
    EXPECT_EQ(bits & seen, 0u) << std::hex << bits;
    seen |= bits;
  }
  EXPECT_EQ(seen, ~uint64_t{0});  // and together they use all 64 bits
}

TEST(MessageTag, ReceiveMaskIgnoresOnlyTheLastFlag) {
  MessageTag tag{3, 5, {7, 9}, false, 11};
  MessageTag last = tag;
  last.last = true;
  EXPECT_EQ(tag.Pack() & kMatchMask, last.Pack() & kMatchMask);
  MessageTag other_stream = tag;
  other_stream.op.stream = 10;
  EXPECT_NE(tag.Pack() & kMatchMask, other_stream.Pack() & kMatchMask);
  MessageTag other_communicator = tag;
  other_communicator.communicator = 4;
  EXPECT_NE(tag.Pack() & kMatchMask, other_communicator.Pack() & kMatchMask);
}

}  // namespace
}  // namespace ucclzip::transport
