// Disaggregated inference: a prefill process (rank 0) hands the paged KV cache of a request to
// a decode process (rank 1): many fixed-size pages of keys and values, bf16 and fp8, sent in one
// group so that they travel as one pipelined stream. With a GPU the pages live in device memory
// and the calls are ordered on a CUDA stream, as a server's would be; without one, host memory.
//   scripts/ucclzip-run -n 2 build/examples/kv_cache_transfer --pages=32 --page_tokens=256
#include <cuda_runtime_api.h>

#include <chrono>

#include "example_support.h"

int main(int argc, char** argv) {
  // 256 tokens a page: pages below CommunicatorOptions::min_compress_bytes (256 KB) go plainly.
  const example::Flags flags(argc, argv, "kv_cache_transfer [--pages=N] [--page_tokens=N]", {"pages", "page_tokens"});
  const long pages = flags.Number("pages", 32), page_tokens = flags.Number("page_tokens", 256);
  constexpr long kHeads = 8, kHeadDim = 128;
  const size_t page_elements = size_t(page_tokens) * kHeads * kHeadDim;
  std::unique_ptr<ucclzip::Communicator> comm = example::Join();
  const int rank = comm->rank();
  if (comm->size() != 2) {
    std::fprintf(stderr, "kv_cache_transfer runs with 2 ranks (prefill and decode)\n");
    return 2;
  }
  int devices = 0;
  const bool device = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  cudaGetLastError();
  cudaStream_t stream = nullptr;
  if (device) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  // Half the pages bf16 keys/values, half fp8 (e4m3, the bf16 values' top byte pattern differs,
  // so they are drawn separately), each page a buffer of its own as a paged cache has.
  std::vector<std::vector<uint8_t>> host(pages);
  std::vector<void*> buffers(pages);
  for (long p = 0; p < pages; ++p) {
    const bool fp8 = p % 2 == 1;
    std::vector<uint16_t> values = example::GaussianBf16(page_elements, 0.5f, p + 1);
    host[p].resize(page_elements * (fp8 ? 1 : 2));
    if (fp8) {
      for (size_t i = 0; i < page_elements; ++i) host[p][i] = static_cast<uint8_t>((values[i] >> 8) & 0xF7);  // finite e4m3
    } else {
      std::memcpy(host[p].data(), values.data(), host[p].size());
    }
    if (device) {
      cudaMalloc(&buffers[p], host[p].size());
      if (rank == 0) cudaMemcpy(buffers[p], host[p].data(), host[p].size(), cudaMemcpyHostToDevice);
    } else {
      buffers[p] = rank == 0 ? host[p].data() : std::calloc(host[p].size(), 1);
    }
  }
  if (device) cudaDeviceSynchronize();
  const auto start = std::chrono::steady_clock::now();
  comm->GroupStart();
  for (long p = 0; p < pages; ++p) {
    const auto dtype = p % 2 ? ucclzip::DataType::kFloat8E4M3 : ucclzip::DataType::kBFloat16;
    if (rank == 0) {
      comm->Send(buffers[p], page_elements, dtype, 1, stream);
    } else {
      comm->Recv(buffers[p], page_elements, dtype, 0, stream);
    }
  }
  example::Check(comm->GroupEnd().Wait(absl::Minutes(5)), rank, "KV-cache transfer");
  if (device) cudaStreamSynchronize(stream);  // the stream, too, has passed the transfer
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank == 0) {
    const ucclzip::CommunicatorStats stats = comm->stats();
    std::printf("prefill: %ld pages (%s memory) in %.4f s; %.2f MB as %.2f MB on the wire (ratio %.3f)\n", pages,
                device ? "device" : "host", seconds, stats.payload_bytes_sent / 1e6, stats.wire_bytes_sent / 1e6,
                stats.send_ratio());
    return 0;
  }
  for (long p = 0; p < pages; ++p) {
    std::vector<uint8_t> got(host[p].size());
    if (device) {
      cudaMemcpy(got.data(), buffers[p], got.size(), cudaMemcpyDeviceToHost);
    } else {
      std::memcpy(got.data(), buffers[p], got.size());
    }
    if (got != host[p]) {
      std::fprintf(stderr, "decode: page %ld differs\n", p);
      return 1;
    }
  }
  std::printf("decode: %ld pages arrived bit-exact\n", pages);
  return 0;
}
