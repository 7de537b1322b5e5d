// Median, Percentile and Mean of the benchmarks' timings.
#include "bench_stats.h"

#include <gtest/gtest.h>

namespace ucclzip::bench {
namespace {

TEST(BenchStats, MedianOfAnOddCountIsTheMiddleValue) {
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_EQ(Median({}), 0);
}

TEST(BenchStats, MedianOfAnEvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(Median({10, 30}), 20);  // not the slower of two timings
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({8, 1, 6, 2, 100, 3, 7, 4}), 5);  // 4 and 6
}

TEST(BenchStats, PercentileIsTheElementBelowWhichTheShareLies) {
  const std::vector<double> values = {9, 0, 8, 1, 7, 2, 6, 3, 5, 4};
  EXPECT_EQ(Percentile(values, 0.1), 1);
  EXPECT_EQ(Percentile(values, 0.9), 9);
  EXPECT_EQ(Percentile(values, 1.0), 9);
  EXPECT_EQ(Percentile(values, 0.0), 0);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(BenchStats, Mean) {
  EXPECT_EQ(Mean({1, 2, 6}), 3);
  EXPECT_EQ(Mean({}), 0);
}

}  // namespace
}  // namespace ucclzip::bench
