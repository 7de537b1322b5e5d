// What the pipeline benchmarks (sendrecv --compress, weightsync) share: parsing --compress,
// creating a communicator with pipeline options, and tensors in host or device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ucclzip/communicator.h"

namespace ucclzip::bench {

absl::StatusOr<CompressionMode> ParseCompression(const std::string& text);
// "off,on" and the like: one or more modes, each at most once.
absl::StatusOr<std::vector<CompressionMode>> ParseCompressionList(const std::string& text);
const char* CompressionName(CompressionMode mode);

// Bytes in host or device memory (device when `device`), copied from `contents`.
class TensorBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<TensorBuffer>> Create(const std::vector<uint8_t>& contents, bool device);
  ~TensorBuffer();
  void* data() { return device_ != nullptr ? device_ : host_.data(); }
  // Overwrites the contents (before a checked receive, so that bytes it misses count as wrong).
  void Clear();
  // Number of bytes that differ from `want`.
  uint64_t CountWrong(const std::vector<uint8_t>& want);

 private:
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
};

}  // namespace ucclzip::bench
