// The statistics the benchmarks report of their timings: the median, percentiles and the mean.
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

namespace ucclzip::bench {

// The value below which a share `q` (0..1) of `values` lies: the sorted values' element
// floor(q * n), the last for q = 1; 0 for none.
inline double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(q * static_cast<double>(values.size()));
  return values[std::min(at, values.size() - 1)];
}

// The middle value, or the mean of the two middle values of an even count (as Python's
// statistics.median, which the GPU scripts' summaries take over rounds); 0 for none. The upper
// of the two, which Percentile(values, 0.5) gives, reported the slower of two timings as their
// median, and leaned to the slower half at every even -n.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + half, values.end());
  if (values.size() % 2 == 1) return values[half];
  return (*std::max_element(values.begin(), values.begin() + half) + values[half]) / 2;
}

inline double Mean(const std::vector<double>& values) {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace ucclzip::bench
