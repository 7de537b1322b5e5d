// Compresses a bf16 tensor with the codec alone and checks the round trip: on the GPU when
// there is one (asynchronous, on a stream), else with the CPU reference.
//   codec_roundtrip [elements]
#include <cuda_runtime_api.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ucclzip/codec.h"

namespace {

// Weights-like bf16 values: Gaussian with sigma 0.02, rounded to nearest even.
std::vector<uint16_t> MakeWeights(size_t count) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gaussian(0.0f, 0.02f);
  std::vector<uint16_t> out(count);
  for (auto& v : out) {
    float f = gaussian(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  }
  return out;
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = size_t{1} << 22;
  if (argc > 1) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long asked = std::strtoull(argv[1], &end, 10);
    // strtoull takes "-5" as a huge count: digits only.
    if (argc > 2 || argv[1][0] < '0' || argv[1][0] > '9' || *end != '\0' || errno != 0 || asked == 0 ||
        asked > (uint64_t{1} << 32)) {
      std::fprintf(stderr, "usage: codec_roundtrip [elements: 1 to 4294967296]\n");
      return 2;
    }
    count = asked;
  }
  const std::vector<uint16_t> weights = MakeWeights(count);
  const uint64_t capacity = ucclzip::MaxFrameBytes(ucclzip::DataType::kBFloat16, count);
  std::vector<uint8_t> frame(capacity);
  std::vector<uint16_t> back(count);
  uint64_t frame_bytes = 0;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    auto codec = ucclzip::GpuCodec::Create(count);
    if (!codec.ok()) return Fail("GpuCodec::Create", codec.status());
    void *d_in, *d_frame, *d_out;
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    cudaMalloc(&d_in, count * 2);
    cudaMalloc(&d_frame, capacity);
    cudaMalloc(&d_out, count * 2);
    cudaMemcpy(d_in, weights.data(), count * 2, cudaMemcpyHostToDevice);
    // Both calls only enqueue work; the stream orders them.
    absl::Status status = (*codec)->Compress(d_in, count, ucclzip::DataType::kBFloat16, d_frame, capacity, stream);
    status.Update((*codec)->Decompress(d_frame, capacity, ucclzip::DataType::kBFloat16, d_out, count, stream));
    status.Update((*codec)->StreamStatus(stream));  // waits, and reports a malformed frame
    if (!status.ok()) return Fail("GPU round trip", status);
    cudaMemcpy(&frame_bytes, static_cast<uint8_t*>(d_frame) + ucclzip::kFrameBytesFieldOffset, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(back.data(), d_out, count * 2, cudaMemcpyDeviceToHost);
    cudaFree(d_in);
    cudaFree(d_frame);
    cudaFree(d_out);
    cudaStreamDestroy(stream);
  } else {
    auto bytes = ucclzip::CompressHost(weights.data(), count, ucclzip::DataType::kBFloat16, frame.data(), capacity);
    if (!bytes.ok()) return Fail("CompressHost", bytes.status());
    frame_bytes = *bytes;
    absl::Status status =
        ucclzip::DecompressHost(frame.data(), frame_bytes, ucclzip::DataType::kBFloat16, back.data(), count);
    if (!status.ok()) return Fail("DecompressHost", status);
  }
  const ucclzip::EntropyReport bound = ucclzip::MeasureEntropy(weights.data(), count, ucclzip::DataType::kBFloat16);
  const bool exact = back == weights;
  std::printf("%s: %zu bf16 values, %llu -> %llu bytes, ratio %.4f (entropy bound %.4f), round trip %s\n",
              devices > 0 ? "GPU" : "CPU", count, static_cast<unsigned long long>(count * 2),
              static_cast<unsigned long long>(frame_bytes), double(count * 2) / frame_bytes, bound.bound_ratio,
              exact ? "bit-exact" : "DIFFERS");
  return exact ? 0 : 1;
}
