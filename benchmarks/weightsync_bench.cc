// ucclzip-bench weightsync: an RL-style weight sync. Rank 0 sends every tensor of a model to
// each of the other ranks, all of them in one group per receiver (--fanout sends), or
// broadcasts each tensor from rank 0, all of them in one group (--fanout broadcast: a pipelined
// chain, in which rank 0's link carries the model once however many receivers), in every mode of
// --compress (modes taking turns, sync by sync); it reports each mode's median time, its speed
// against the first mode and its bytes checked on every receiver.
//
// The model is Llama-3-8B-shaped (bf16): embedding 128256x4096; per layer q 4096x4096,
// k 1024x4096, v 1024x4096, o 4096x4096, gate 14336x4096, up 14336x4096, down 4096x14336,
// input and post-attention norms 4096; final norm 4096; lm_head 128256x4096. Weights are
// Gaussian with sigma 0.02, norms 1.0. --layers and --vocab shrink it for quick runs; --input DIR
// sends the raw little-endian files of DIR (of --dtype) instead.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "mode_turns.h"
#include "pipeline_bench_util.h"
#include "rank_launcher.h"
#include "tensor_gen.h"
#include "ucclzip/communicator.h"

ABSL_FLAG(int, layers, 32, "transformer layers of the model");
ABSL_FLAG(int, vocab, 128256, "vocabulary size (embedding and lm_head rows)");
ABSL_FLAG(std::string, fanout, "sends",
          "how rank 0 reaches the receivers: sends (one group of Sends per receiver) or broadcast (one group "
          "of a Broadcast per tensor)");
// --input (defined by the codec benchmark) names a folder of raw tensor files here.
ABSL_DECLARE_FLAG(std::string, input);

namespace ucclzip::bench {
namespace {

constexpr absl::Duration kWait = absl::Minutes(10);

struct TensorSpec {
  std::string name;
  uint64_t count;
  std::string dist;  // key into the generated contents; one tensor per (count, dist) is generated
  std::string file;  // --input
};

std::vector<TensorSpec> LlamaShapedModel(int layers, uint64_t vocab) {
  const uint64_t hidden = 4096, kv = 1024, ffn = 14336;
  std::vector<TensorSpec> model{{"embed_tokens", vocab * hidden, "gaussian:0.02", ""}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("layers.", l, ".");
    for (auto [name, count] : std::initializer_list<std::pair<const char*, uint64_t>>{
             {"q_proj", hidden * hidden}, {"k_proj", kv * hidden}, {"v_proj", kv * hidden}, {"o_proj", hidden * hidden},
             {"gate_proj", ffn * hidden}, {"up_proj", ffn * hidden}, {"down_proj", hidden * ffn}}) {
      model.push_back({p + name, count, "gaussian:0.02", ""});
    }
    model.push_back({p + "input_layernorm", hidden, "constant:1.0", ""});
    model.push_back({p + "post_attention_layernorm", hidden, "constant:1.0", ""});
  }
  model.push_back({"norm", hidden, "constant:1.0", ""});
  model.push_back({"lm_head", vocab * hidden, "gaussian:0.02", ""});
  return model;
}

absl::StatusOr<std::vector<TensorSpec>> InputModel(const std::string& dir, DataType dtype) {
  std::vector<TensorSpec> model;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    model.push_back({entry.path().filename().string(), entry.file_size() / ElementSize(dtype), "", entry.path().string()});
  }
  std::sort(model.begin(), model.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  if (model.empty()) return absl::NotFoundError(absl::StrCat("no tensor files in ", dir));
  return model;
}

absl::StatusOr<std::vector<uint8_t>> Contents(const TensorSpec& t, DataType dtype) {
  if (!t.file.empty()) {
    std::ifstream in(t.file, std::ios::binary);
    std::vector<uint8_t> bytes(t.count * ElementSize(dtype));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!in) return absl::DataLossError(absl::StrCat("reading ", t.file));
    return bytes;
  }
  absl::StatusOr<testing::Distribution> dist = testing::ParseDistribution(t.dist);
  if (!dist.ok()) return dist.status();
  return testing::GenerateTensor(dtype, t.count, *dist, t.count);
}

// `contents` with tensor `index`'s number in its first bytes (8, or all of a smaller tensor):
// tensors of one shape share their contents, and a tensor that landed in another one's buffer
// would otherwise check as right.
std::vector<uint8_t> Stamped(const std::vector<uint8_t>& contents, uint64_t index) {
  std::vector<uint8_t> stamped(contents);
  std::memcpy(stamped.data(), &index, std::min(sizeof(index), stamped.size()));
  return stamped;
}

// One sync's time, the slowest rank's, and the bytes this rank sent in it: those of the barrier
// before it and of the exchange of the times after it, no part of the sync, left out.
struct Sync {
  double seconds = 0;
  uint64_t payload = 0, wire = 0;
};

// One sync: rank 0 sends every tensor to every receiver, or broadcasts each.
absl::StatusOr<Sync> SyncOnce(Communicator& comm, std::vector<std::unique_ptr<TensorBuffer>>& buffers,
                              const std::vector<TensorSpec>& model, DataType dtype, CompressionMode mode,
                              bool broadcast) {
  if (absl::Status s = Barrier(comm); !s.ok()) return s;
  const CommunicatorStats before = comm.stats();
  const absl::Time start = absl::Now();
  std::vector<Operation> groups;
  if (broadcast) {
    comm.GroupStart();
    for (size_t i = 0; i < model.size(); ++i) {
      comm.Broadcast(buffers[i]->data(), buffers[i]->data(), model[i].count, dtype, 0, nullptr,
                     CollectiveOptions{.compression = mode});
    }
    groups.push_back(comm.GroupEnd());
  }
  for (int receiver = 1; !broadcast && receiver < comm.size(); ++receiver) {
    if (comm.rank() != 0 && comm.rank() != receiver) continue;
    comm.GroupStart();
    for (size_t i = 0; i < model.size(); ++i) {
      if (comm.rank() == 0) {
        comm.Send(buffers[i]->data(), model[i].count, dtype, receiver, nullptr, SendOptions{.compression = mode});
      } else {
        comm.Recv(buffers[i]->data(), model[i].count, dtype, 0, nullptr);
      }
    }
    groups.push_back(comm.GroupEnd());
  }
  for (const Operation& group : groups) {
    if (absl::Status s = group.Wait(kWait); !s.ok()) return s;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const CommunicatorStats after = comm.stats();
  absl::StatusOr<std::vector<double>> all = GatherDoubles(comm, {seconds});
  if (!all.ok()) return all.status();
  return Sync{.seconds = *std::max_element(all->begin(), all->end()),
              .payload = after.payload_bytes_sent - before.payload_bytes_sent,
              .wire = after.wire_bytes_sent - before.wire_bytes_sent};
}

absl::Status RunRank() {
  absl::StatusOr<BootstrapConfig> config = BootstrapConfigFromEnvironment();
  if (!config.ok()) return config.status();
  absl::StatusOr<bool> use_device = UseDeviceMemory(config->local_rank);
  if (!use_device.ok()) return use_device.status();
  const bool device = *use_device;
  absl::StatusOr<DataType> dtype = ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  const std::string fanout = absl::GetFlag(FLAGS_fanout);
  if (fanout != "sends" && fanout != "broadcast") return absl::InvalidArgumentError("--fanout must be sends or broadcast");
  const bool broadcast = fanout == "broadcast";
  // One mode alone is measured against uncompressed syncs, as it always was.
  absl::StatusOr<std::vector<CompressionMode>> listed = ParseCompressionList(CompressFlag("on"));
  if (!listed.ok()) return listed.status();
  std::vector<CompressionMode> modes = *listed;
  if (modes.size() == 1 && modes[0] != CompressionMode::kOff) modes.insert(modes.begin(), CompressionMode::kOff);
  absl::StatusOr<std::vector<TensorSpec>> model =
      absl::GetFlag(FLAGS_input).empty()
          ? absl::StatusOr<std::vector<TensorSpec>>(LlamaShapedModel(absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_vocab)))
          : InputModel(absl::GetFlag(FLAGS_input), *dtype);
  if (!model.ok()) return model.status();

  absl::StatusOr<std::unique_ptr<Communicator>> communicator =
      CreateCommunicator(*config, CommunicatorOptions{.op_timeout = absl::Minutes(5)});
  if (!communicator.ok()) return communicator.status();
  Communicator& comm = **communicator;
  if (comm.size() < 2) return absl::InvalidArgumentError("weightsync needs at least 2 ranks");

  // Contents are generated once per (count, distribution) and shared by the tensors of that
  // shape, each stamped with its number (Stamped).
  std::map<std::pair<uint64_t, std::string>, std::vector<uint8_t>> contents;
  std::vector<std::unique_ptr<TensorBuffer>> buffers;
  uint64_t total_bytes = 0;
  for (const TensorSpec& t : *model) {
    auto key = std::make_pair(t.count, t.dist + t.file);
    if (!contents.count(key)) {
      absl::StatusOr<std::vector<uint8_t>> bytes = Contents(t, *dtype);
      if (!bytes.ok()) return bytes.status();
      contents[key] = std::move(*bytes);
    }
    const std::vector<uint8_t>& want = contents[key];
    absl::StatusOr<std::unique_ptr<TensorBuffer>> buffer = TensorBuffer::Create(
        comm.rank() == 0 ? Stamped(want, buffers.size()) : std::vector<uint8_t>(want.size()), device);
    if (!buffer.ok()) return buffer.status();
    buffers.push_back(std::move(*buffer));
    total_bytes += want.size();
  }
  const int iterations = std::max(absl::GetFlag(FLAGS_iters), 1);
  // The modes take turns (ModeOfTurn), so that drift in the machine's speed, and what one call
  // leaves behind for the next, affect all alike.
  std::map<CompressionMode, std::vector<double>> times;
  std::map<CompressionMode, double> payload, wire;
  absl::Status warm = WarmUp(comm, WarmupDuration(), [&]() -> absl::Status {
    for (CompressionMode m : modes) {
      if (absl::StatusOr<Sync> sync = SyncOnce(comm, buffers, *model, *dtype, m, broadcast); !sync.ok()) {
        return sync.status();
      }
    }
    return absl::OkStatus();
  });
  if (!warm.ok()) return warm;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + iterations; ++i) {
    for (size_t turn = 0; turn < modes.size(); ++turn) {
      const CompressionMode m = modes[ModeOfTurn(i, turn, modes.size())];
      absl::StatusOr<Sync> sync = SyncOnce(comm, buffers, *model, *dtype, m, broadcast);
      if (!sync.ok()) return sync.status();
      // The ratio, as the time, of the timed syncs alone: in the warm-up syncs auto is still
      // measuring the link's rates, and what it sends there need not be what it settles on.
      if (i < absl::GetFlag(FLAGS_warmup)) continue;
      times[m].push_back(sync->seconds);
      payload[m] += sync->payload;
      wire[m] += sync->wire;
    }
  }
  // One more sync per mode into cleared buffers, checked byte by byte on the receivers.
  std::map<CompressionMode, uint64_t> wrong;
  for (CompressionMode m : modes) {
    if (comm.rank() != 0) {
      for (auto& buffer : buffers) {
        if (absl::Status s = buffer->Clear(); !s.ok()) return s;
      }
    }
    if (absl::StatusOr<Sync> sync = SyncOnce(comm, buffers, *model, *dtype, m, broadcast); !sync.ok()) {
      return sync.status();
    }
    uint64_t mine = 0;
    for (size_t i = 0; comm.rank() != 0 && i < model->size(); ++i) {
      absl::StatusOr<uint64_t> count =
          buffers[i]->CountWrong(Stamped(contents[{(*model)[i].count, (*model)[i].dist + (*model)[i].file}], i),
                               ElementSize(*dtype));
      if (!count.ok()) return count.status();
      mine += *count;
    }
    absl::StatusOr<std::vector<double>> counts = GatherDoubles(comm, {static_cast<double>(mine)});
    if (!counts.ok()) return counts.status();
    for (double count : *counts) wrong[m] += static_cast<uint64_t>(count);
  }
  if (comm.rank() != 0) return absl::OkStatus();
  const char* tls = comm.options().ucx_transports.empty() ? "default" : comm.options().ucx_transports.c_str();
  if (!absl::GetFlag(FLAGS_json)) {
    std::printf("# ucclzip-bench weightsync: %zu tensors, %.3f GB %s, 1 sender -> %d receivers by %s, %s memory, "
                "UCX_TLS=%s\n",
                model->size(), total_bytes / 1e9, DataTypeName(*dtype), comm.size() - 1, fanout.c_str(),
                device ? "device" : "host", tls);
    std::printf("# %8s %10s %10s %8s %8s\n", "compress", "time (s)", "vs first", "ratio", "#wrong");
  }
  const double first = Median(times[modes[0]]);
  for (CompressionMode m : modes) {
    const double median = Median(times[m]);
    const double ratio = wire[m] > 0 ? payload[m] / wire[m] : 1;
    if (absl::GetFlag(FLAGS_json)) {
      std::printf("{\"bench\":\"weightsync\",\"tensors\":%zu,\"bytes\":%llu,\"type\":\"%s\",\"receivers\":%d,\"fanout\":\"%s\","
                  "\"memory\":\"%s\",\"tls\":\"%s\",\"compress\":\"%s\",\"time_s\":%.4f,\"mean_s\":%.4f,\"vs_first\":%.4f,"
                  "\"first\":\"%s\",\"ratio\":%.4f,\"wrong\":%llu}\n",
                  model->size(), static_cast<unsigned long long>(total_bytes), DataTypeName(*dtype), comm.size() - 1, fanout.c_str(),
                  device ? "device" : "host", tls, CompressionName(m), median, Mean(times[m]), first / median,
                  CompressionName(modes[0]), ratio, static_cast<unsigned long long>(wrong[m]));
    } else {
      std::printf("  %8s %10.3f %9.3fx %8.3f %8llu\n", CompressionName(m), median, first / median, ratio,
                  static_cast<unsigned long long>(wrong[m]));
    }
  }
  uint64_t all_wrong = 0;
  for (const auto& [mode, count] : wrong) all_wrong += count;
  return CheckedElements(all_wrong);
}

int WeightSyncMain(const std::vector<std::string>&) {
  return RunRankOrLaunch("weightsync", absl::GetFlag(FLAGS_ranks), RunRank);
}

const RegisterSubcommand kRegister("weightsync", "one sender to N receivers: a Llama-3-8B-shaped model, compressed vs not",
                                   SharedFlags({FlagGroup::kCommunicator},
                                               {"layers", "vocab", "fanout", "input", "dtype", "iters", "warmup", "warmup_ms", "json"}),
                                   WeightSyncMain);

}  // namespace
}  // namespace ucclzip::bench
