// The CPU codec on HostCodecThreads: the same frame from any thread count, the same output and
// the same error from any thread count, concurrent callers taking turns, and checked arguments.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

constexpr int kThreadCounts[] = {1, 2, 3, 8};

std::vector<uint8_t> Compress(const std::vector<uint8_t>& tensor, DataType dtype, const CodecOptions& options,
                              HostCodecThreads* threads) {
  const uint64_t count = tensor.size() / ElementSize(dtype);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count));
  absl::StatusOr<uint64_t> size = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size(), options, threads);
  EXPECT_TRUE(size.ok()) << size.status();
  frame.resize(size.value_or(0));
  return frame;
}

// Decodes into a buffer with guard bytes on both sides; fails the test if one was written.
absl::Status Decompress(const std::vector<uint8_t>& frame, DataType dtype, uint64_t count, HostCodecThreads* threads,
                        std::vector<uint8_t>& out) {
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> guarded(count * ElementSize(dtype) + 2 * kGuard, 0xCD);
  absl::Status status = DecompressHost(frame.data(), frame.size(), dtype, guarded.data() + kGuard, count, threads);
  for (size_t i = 0; i < kGuard; ++i) {
    EXPECT_EQ(guarded[i], 0xCD);
    EXPECT_EQ(guarded[guarded.size() - 1 - i], 0xCD);
  }
  out.assign(guarded.begin() + kGuard, guarded.end() - kGuard);
  return status;
}

class CpuCodecThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int n : kThreadCounts) {
      absl::StatusOr<std::unique_ptr<HostCodecThreads>> threads = HostCodecThreads::Create(n);
      ASSERT_TRUE(threads.ok()) << threads.status();
      ASSERT_EQ((*threads)->threads(), n);
      pools_.push_back(std::move(*threads));
    }
  }
  std::vector<std::unique_ptr<HostCodecThreads>> pools_;
};

struct Case {
  DataType dtype;
  Distribution dist;
  uint64_t count;
  uint32_t lane_symbols;
  bool mixed = false;  // MixedScaleTensor instead of `dist`: tiles with tables of their own
};

TEST_F(CpuCodecThreads, EveryThreadCountWritesTheSameFrameAndReadsIt) {
  const Case cases[] = {
      {DataType::kBFloat16, {DistKind::kGaussian, 0.02}, 3'000'017, 0},   // many chunks
      {DataType::kBFloat16, {DistKind::kGaussian, 0.02}, 300'001, 32},    // short lanes: the most chunks
      {DataType::kFloat16, {DistKind::kLaplace, 0.05}, 4'097, 64},        // 3 chunks: fewer than the tasks
      {DataType::kFloat32, {DistKind::kStudentT3, 0.01}, 1'000'003, 0},
      {DataType::kFloat8E4M3, {DistKind::kGaussian, 1.0}, 2'000'001, 0},
      {DataType::kBFloat16, {DistKind::kRandomBytes, 0}, 500'000, 0},     // symbols stored
      {DataType::kFloat32, {DistKind::kConstant, 0.5}, 200'000, 0},       // one symbol
      {DataType::kBFloat16, {DistKind::kGaussian, 1.0}, 1'000, 0},        // stored frame
      {DataType::kBFloat16, {}, 3'000'017, 0, true},                      // tables of their own
      {DataType::kFloat32, {}, 1'000'003, 128, true},
      {DataType::kFloat8E5M2, {}, 700'001, 4096, true},                   // 2 tiles: fewer than the tasks
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << DataTypeName(c.dtype) << " " << (c.mixed ? "mixed" : c.dist.Name()) << " x"
                                      << c.count << " lane_symbols " << c.lane_symbols);
    const auto tensor = c.mixed ? MixedScaleTensor(c.dtype, c.count, 100'000, c.count)
                                : GenerateTensor(c.dtype, c.count, c.dist, c.count);
    const CodecOptions options{.lane_symbols = c.lane_symbols};
    const std::vector<uint8_t> reference = Compress(tensor, c.dtype, options, nullptr);
    ASSERT_FALSE(reference.empty());
    for (const auto& pool : pools_) {
      SCOPED_TRACE(::testing::Message() << pool->threads() << " threads");
      EXPECT_EQ(Compress(tensor, c.dtype, options, pool.get()), reference);
      std::vector<uint8_t> out;
      ASSERT_TRUE(Decompress(reference, c.dtype, c.count, pool.get(), out).ok());
      EXPECT_EQ(out, tensor);
    }
  }
}

TEST_F(CpuCodecThreads, EveryThreadCountReportsTheSameError) {
  const uint64_t count = 1'000'000;
  // Tiles of 65536 elements (32 chunks) in blocks of three scales: many have tables of their own.
  const auto tensor = MixedScaleTensor(DataType::kBFloat16, count, 3 * 65536 + 999, 3);
  const std::vector<uint8_t> frame = Compress(tensor, DataType::kBFloat16, {.lane_symbols = 64}, nullptr);
  auto info = ReadFrameInfo(frame.data(), frame.size());
  ASSERT_TRUE(info.ok());
  const codec::Layout layout = codec::ComputeLayout(2, true, count, 64);
  const uint32_t chunks = layout.num_chunks;
  ASSERT_GT(chunks, 400u);
  const auto chunk_offset = [&](uint32_t c) {
    return info->coded_offset + 4 * uint64_t{codec::ChunkEntry(frame.data(), layout, c)};
  };
  const auto table_offset = [&](uint32_t tile) {
    const uint32_t entry = codec::TileEntry(frame.data(), layout, tile);
    EXPECT_NE(entry, codec::kGlobalTableTile) << "tile " << tile << " should have its own table";
    return info->coded_offset + 4 * uint64_t{entry};
  };
  std::vector<std::vector<uint8_t>> damaged;
  // Streams of two chunks far apart damaged: the first one's error must win.
  for (auto [first, second] : {std::pair{17u, 300u}, std::pair{chunks - 2, chunks - 1}, std::pair{0u, 1u}}) {
    auto bad = frame;
    bad[chunk_offset(first) + 200] ^= 0x11;
    bad[chunk_offset(second) + 150] ^= 0x22;
    damaged.push_back(bad);
  }
  // An index entry out of order after a damaged stream, and one before it.
  for (auto [entry, stream] : {std::pair{250u, 100u}, std::pair{100u, 250u}}) {
    auto bad = frame;
    bad[chunk_offset(stream) + 200] ^= 0x11;
    const uint32_t huge = 0x7FFFFFFF;
    std::memcpy(bad.data() + layout.index_offset + 4 * entry, &huge, 4);
    damaged.push_back(bad);
  }
  // A tile's own table damaged after a damaged stream, and before one.
  for (auto [tile, stream] : {std::pair{12u, 100u}, std::pair{2u, 250u}}) {
    auto bad = frame;
    bad[chunk_offset(stream) + 200] ^= 0x11;
    bad[table_offset(tile) + codec::kTileBitmapBytes] ^= 0x01;
    damaged.push_back(bad);
  }
  for (size_t i = 0; i < damaged.size(); ++i) {
    std::vector<uint8_t> out;
    const absl::Status expected = Decompress(damaged[i], DataType::kBFloat16, count, nullptr, out);
    ASSERT_FALSE(expected.ok()) << "case " << i;
    for (const auto& pool : pools_) {
      EXPECT_EQ(Decompress(damaged[i], DataType::kBFloat16, count, pool.get(), out), expected)
          << "case " << i << ", " << pool->threads() << " threads";
    }
  }
  // The table of tile 2 comes before chunk 250 (tile 7), tile 12's after chunk 100 (tile 3).
  std::vector<uint8_t> out;
  EXPECT_NE(Decompress(damaged[5], DataType::kBFloat16, count, nullptr, out).message().find("chunk 100"),
            std::string::npos);
  EXPECT_NE(Decompress(damaged[6], DataType::kBFloat16, count, nullptr, out).message().find("tile 2's own"),
            std::string::npos);
}

TEST_F(CpuCodecThreads, ConcurrentCallersTakeTurns) {
  HostCodecThreads* pool = pools_.back().get();
  const uint64_t count = 400'000;
  const auto a = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 21);
  const auto b = GenerateTensor(DataType::kFloat32, count, {DistKind::kLaplace, 0.01}, 22);
  const auto frame_a = Compress(a, DataType::kBFloat16, {}, nullptr), frame_b = Compress(b, DataType::kFloat32, {}, nullptr);
  const auto work = [&](const std::vector<uint8_t>& tensor, const std::vector<uint8_t>& expected, DataType dtype) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(Compress(tensor, dtype, {}, pool), expected);
      std::vector<uint8_t> out;
      EXPECT_TRUE(Decompress(expected, dtype, count, pool, out).ok());
      EXPECT_EQ(out, tensor);
    }
  };
  std::thread other([&] { work(b, frame_b, DataType::kFloat32); });
  work(a, frame_a, DataType::kBFloat16);
  other.join();
}

TEST(HostCodecThreadsCreate, ChecksTheCount) {
  for (int bad : {-1, 257}) {
    absl::StatusOr<std::unique_ptr<HostCodecThreads>> threads = HostCodecThreads::Create(bad);
    EXPECT_EQ(threads.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(threads.status().message().find(std::to_string(bad)), std::string::npos) << threads.status();
  }
  EXPECT_GE(DefaultHostCodecThreads(), 1);
  EXPECT_LE(DefaultHostCodecThreads(), 8);
  absl::StatusOr<std::unique_ptr<HostCodecThreads>> chosen = HostCodecThreads::Create(0);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ((*chosen)->threads(), DefaultHostCodecThreads());
}

// Starts 256 threads with room for the stacks of a few only (a cap on the address space), prints
// the error and exits 0 where it is the one of running out.
void CreateWithRoomForAFewThreads() {
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  constexpr uint64_t kRoom = uint64_t{40} << 20;  // about four 8 MB thread stacks
  const uint64_t limit = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + kRoom;
  const rlimit address_space{limit, limit};
  if (setrlimit(RLIMIT_AS, &address_space) != 0) std::_Exit(2);
  const absl::StatusOr<std::unique_ptr<HostCodecThreads>> threads = HostCodecThreads::Create(256);
  std::fprintf(stderr, "%s\n", threads.status().ToString().c_str());
  std::_Exit(threads.status().code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
}

// Where the machine runs out of threads part of the way, the error names the worker that failed
// to start, not the first: the workers that did start are stopped before the error is written.
TEST(HostCodecThreadsCreate, AFailedStartNamesTheWorkerThatFailed) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // The sanitizers' own allocators need more address space than the cap leaves (TSan dies with
  // exit status 66, out of memory, before the codec starts a thread).
  GTEST_SKIP() << "a cap on the address space starves the sanitizer's allocator";
#endif
  EXPECT_EXIT(CreateWithRoomForAFewThreads(), ::testing::ExitedWithCode(0), "starting worker ([2-9]|[1-9][0-9]+) of 255");
}

}  // namespace
}  // namespace ucclzip::testing
