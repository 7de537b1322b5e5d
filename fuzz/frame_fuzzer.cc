// Fuzzes the CPU frame decoder with untrusted frames, and the codec with arbitrary tensors.
//   byte 0 even: the rest is a frame; it is decoded as the type and count its header claims
//                (bounded), which must give an error or a result, never a fault; on three
//                threads it must give the same error or the same result.
//   byte 0 odd:  the rest is a tensor of the type byte 1 names; compress, then decompress, and
//                the result must be bit-identical; on three threads the frame must be the same.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ucclzip/codec.h"

namespace {

constexpr uint64_t kMaxElements = 1 << 20;

ucclzip::HostCodecThreads* Threads() {
  static ucclzip::HostCodecThreads* const threads = ucclzip::HostCodecThreads::Create(3)->release();
  return threads;
}

void DecodeUntrusted(const uint8_t* data, size_t size) {
  if (size < ucclzip::kFrameHeaderBytes) {
    std::vector<uint8_t> out(16);
    (void)ucclzip::DecompressHost(data, size, ucclzip::DataType::kBFloat16, out.data(), 8);
    return;
  }
  uint8_t dtype;
  uint64_t count;
  std::memcpy(&dtype, data + 6, 1);
  std::memcpy(&count, data + 8, 8);
  if (!ucclzip::IsValidDataType(dtype) || count > kMaxElements) return;
  const auto type = static_cast<ucclzip::DataType>(dtype);
  std::vector<uint8_t> out(count * ucclzip::ElementSize(type) + 1), threaded(out.size());
  const absl::Status status = ucclzip::DecompressHost(data, size, type, out.data(), count);
  if (ucclzip::DecompressHost(data, size, type, threaded.data(), count, Threads()) != status) abort();
  if (status.ok() && threaded != out) abort();
  (void)ucclzip::ReadFrameInfo(data, size);
}

void RoundTrip(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const uint8_t dtype = data[0] % 13;
  const auto type = static_cast<ucclzip::DataType>(dtype);
  const size_t width = ucclzip::ElementSize(type);
  const uint64_t count = (size - 1) / width;
  // Stretch small inputs so that split frames (>= 4096 elements) are exercised too.
  std::vector<uint8_t> tensor(count * width * (count < 4096 && count > 0 ? 4096 / count + 1 : 1));
  for (size_t i = 0; i < tensor.size(); ++i) tensor[i] = data[1 + i % (count * width ? count * width : 1)];
  const uint64_t n = width ? tensor.size() / width : 0;
  std::vector<uint8_t> frame(ucclzip::MaxFrameBytes(type, n));
  auto bytes = ucclzip::CompressHost(tensor.data(), n, type, frame.data(), frame.size());
  if (!bytes.ok()) abort();
  std::vector<uint8_t> threaded(frame.size());
  auto threaded_bytes = ucclzip::CompressHost(tensor.data(), n, type, threaded.data(), threaded.size(), {}, Threads());
  if (!threaded_bytes.ok() || *threaded_bytes != *bytes || std::memcmp(threaded.data(), frame.data(), *bytes) != 0) abort();
  std::vector<uint8_t> back(tensor.size());
  if (!ucclzip::DecompressHost(frame.data(), *bytes, type, back.data(), n).ok()) abort();
  if (back != tensor) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    DecodeUntrusted(data + 1, size - 1);
  } else {
    RoundTrip(data + 1, size - 1);
  }
  return 0;
}
