#include "bench_cli.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "ucclzip/communicator.h"

ABSL_FLAG(std::string, dtype, "bf16", "element type: bf16|fp16|fp32|fp8e4m3|fp8e5m2|raw|int32|...");
ABSL_FLAG(bool, json, false, "print one JSON object per result instead of a table");
ABSL_FLAG(int, iters, 20, "timed iterations per measurement (the median is reported; codec --device gpu also times as many back to back)");
ABSL_FLAG(int, warmup, 3, "untimed iterations before timing");
ABSL_FLAG(int, warmup_ms, 200,
          "untimed calls go on until this many milliseconds have passed, as well as --warmup of them, before each "
          "size is timed (and before the codec's GPU timings): an idle GPU runs at low clocks until sustained work "
          "wakes it");
ABSL_FLAG(std::string, dist, "gaussian:0.02",
          "value distribution: gaussian:S, laplace:B, uniform:A, student-t3:S, random-bytes, special");
ABSL_FLAG(int, ranks, 2, "ranks to start on this host (ignored when a launcher already started this rank)");
ABSL_FLAG(std::string, memory, "host", "buffer memory: host|device");
ABSL_FLAG(std::string, tls, "", "UCX transports (UCX_TLS syntax, e.g. tcp or posix,sysv); empty: UCX's choice");
ABSL_FLAG(std::string, compress, "",
          "on|off|auto, or a list such as off,on whose modes take turns; empty: the subcommand's default "
          "(sendrecv off, the collectives off,on, weightsync on against off)");
ABSL_FLAG(ucclzip::bench::ByteSize, pipeline_block, ucclzip::bench::ByteSize{ucclzip::CommunicatorOptions{}.pipeline_block_bytes},
          "largest pipeline block (K/M/G)");
ABSL_FLAG(ucclzip::bench::ByteSize, min_pipeline_block,
          ucclzip::bench::ByteSize{ucclzip::CommunicatorOptions{}.min_pipeline_block_bytes},
          "smallest pipeline block of an operation cut into four (K/M/G); --pipeline_block or more: fixed blocks");
ABSL_FLAG(ucclzip::bench::ByteSize, recursive_doubling,
          ucclzip::bench::ByteSize{ucclzip::CommunicatorOptions{}.recursive_doubling_bytes},
          "allreduces of at most this many bytes run by recursive doubling, larger ones as a ring (K/M/G); 0: always the ring");
ABSL_FLAG(ucclzip::bench::ByteSize, tree_broadcast,
          ucclzip::bench::ByteSize{ucclzip::CommunicatorOptions{}.tree_broadcast_bytes},
          "broadcasts of at most this many bytes go down a binomial tree, larger ones along the chain (K/M/G); 0: always the chain");
ABSL_FLAG(int, cpu_codec_threads, ucclzip::CommunicatorOptions{}.cpu_codec_threads,
          "threads of the CPU codec (host buffers), the pipeline thread included; 0: the library's default");

// nccl-tests' vocabulary, short and long; each wins over the older name it aliases.
ABSL_FLAG(std::optional<ucclzip::bench::ByteSize>, b, std::nullopt, "nccl-tests: smallest size (K/M/G)");
ABSL_FLAG(std::optional<ucclzip::bench::ByteSize>, minbytes, std::nullopt, "nccl-tests: smallest size (K/M/G)");
ABSL_FLAG(std::optional<ucclzip::bench::ByteSize>, e, std::nullopt, "nccl-tests: largest size (K/M/G)");
ABSL_FLAG(std::optional<ucclzip::bench::ByteSize>, maxbytes, std::nullopt, "nccl-tests: largest size (K/M/G)");
ABSL_FLAG(std::optional<double>, f, std::nullopt, "nccl-tests: size multiplier from one size to the next");
ABSL_FLAG(std::optional<double>, stepfactor, std::nullopt, "nccl-tests: size multiplier from one size to the next");
ABSL_FLAG(std::optional<int>, n, std::nullopt, "nccl-tests: timed iterations (alias of --iters)");
ABSL_FLAG(std::optional<int>, w, std::nullopt, "nccl-tests: warm-up iterations (alias of --warmup)");
ABSL_FLAG(std::optional<int>, warmup_iters, std::nullopt, "nccl-tests: warm-up iterations (alias of --warmup)");
ABSL_FLAG(std::optional<std::string>, d, std::nullopt, "nccl-tests: element type (alias of --dtype)");
ABSL_FLAG(std::optional<std::string>, datatype, std::nullopt, "nccl-tests: element type (alias of --dtype)");
ABSL_FLAG(std::optional<std::string>, o, std::nullopt, "nccl-tests: reduction sum|prod|min|max|avg");
ABSL_FLAG(std::optional<std::string>, op, std::nullopt, "nccl-tests: reduction sum|prod|min|max|avg");
ABSL_FLAG(std::optional<int>, r, std::nullopt, "nccl-tests: root rank");
ABSL_FLAG(std::optional<int>, root, std::nullopt, "nccl-tests: root rank");
ABSL_FLAG(std::optional<int>, c, std::nullopt, "nccl-tests: check results (1) or not (0)");
ABSL_FLAG(std::optional<int>, check, std::nullopt, "nccl-tests: check results (1) or not (0)");

namespace ucclzip::bench {

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  text = absl::StripAsciiWhitespace(text);
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K': multiplier = uint64_t{1} << 10; break;
      case 'M': multiplier = uint64_t{1} << 20; break;
      case 'G': multiplier = uint64_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > UINT64_MAX / multiplier) {
    *error = "expected a byte count such as 4096, 64K, 16M or 1G";
    return false;
  }
  size->bytes = value * multiplier;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) {
  // The largest suffix that writes the size exactly, as one would type it.
  for (const auto& [suffix, shift] : {std::pair{"G", 30}, std::pair{"M", 20}, std::pair{"K", 10}}) {
    const uint64_t unit = uint64_t{1} << shift;
    if (size.bytes >= unit && size.bytes % unit == 0) return absl::StrCat(size.bytes / unit, suffix);
  }
  return absl::StrCat(size.bytes);
}

namespace {

// The first of the flags that was given, else `fallback`.
template <typename T>
T FirstSet(std::initializer_list<std::optional<T>> values, T fallback) {
  for (const std::optional<T>& value : values) {
    if (value) return *value;
  }
  return fallback;
}

std::vector<std::string> FlagsOf(FlagGroup group) {
  switch (group) {
    case FlagGroup::kMeasure: return {"dtype", "dist", "iters", "warmup", "warmup_ms", "json"};
    case FlagGroup::kCommunicator: return {"ranks", "memory", "tls", "compress", "pipeline_block", "min_pipeline_block", "recursive_doubling",
                                             "tree_broadcast", "cpu_codec_threads"};
    case FlagGroup::kSweep: return {"b", "minbytes", "e", "maxbytes", "f", "stepfactor", "n", "w", "warmup_iters", "d", "datatype"};
    case FlagGroup::kReduction: return {"o", "op", "r", "root", "c", "check"};
  }
  return {};
}

}  // namespace

uint64_t MinBytes(uint64_t fallback) {
  return FirstSet({absl::GetFlag(FLAGS_b), absl::GetFlag(FLAGS_minbytes)}, ByteSize{fallback}).bytes;
}
uint64_t MaxBytes(uint64_t fallback) {
  return FirstSet({absl::GetFlag(FLAGS_e), absl::GetFlag(FLAGS_maxbytes)}, ByteSize{fallback}).bytes;
}
uint64_t NextSize(uint64_t bytes) {
  const double factor = StepFactor();
  if (factor <= 1 || bytes == 0) return bytes == 0 && factor > 1 ? 1 : UINT64_MAX;
  return std::max<uint64_t>(static_cast<uint64_t>(static_cast<double>(bytes) * factor), bytes + 1);
}

double StepFactor() { return FirstSet({absl::GetFlag(FLAGS_f), absl::GetFlag(FLAGS_stepfactor)}, 2.0); }
int Iterations() { return FirstSet<int>({absl::GetFlag(FLAGS_n)}, absl::GetFlag(FLAGS_iters)); }
int WarmupIterations() {
  return FirstSet<int>({absl::GetFlag(FLAGS_w), absl::GetFlag(FLAGS_warmup_iters)}, absl::GetFlag(FLAGS_warmup));
}
absl::Duration WarmupDuration() { return absl::Milliseconds(std::max(absl::GetFlag(FLAGS_warmup_ms), 0)); }
std::string DataTypeFlag() {
  return FirstSet<std::string>({absl::GetFlag(FLAGS_d), absl::GetFlag(FLAGS_datatype)}, absl::GetFlag(FLAGS_dtype));
}
std::string ReduceOpFlag() { return FirstSet<std::string>({absl::GetFlag(FLAGS_o), absl::GetFlag(FLAGS_op)}, "sum"); }
std::string CompressFlag(const char* fallback) {
  const std::string compress = absl::GetFlag(FLAGS_compress);
  return compress.empty() ? fallback : compress;
}
int RootFlag() { return FirstSet<int>({absl::GetFlag(FLAGS_r), absl::GetFlag(FLAGS_root)}, 0); }
bool CheckFlag() { return FirstSet<int>({absl::GetFlag(FLAGS_c), absl::GetFlag(FLAGS_check)}, 1) != 0; }

absl::Status CheckSweepFlags(uint64_t min_bytes, uint64_t max_bytes) {
  if (min_bytes > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("-b ", min_bytes, " is larger than -e ", max_bytes));
  }
  if (const double factor = StepFactor(); !(factor >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("-f ", factor, " is not a factor of 1 or more"));
  }
  if (Iterations() < 1) return absl::InvalidArgumentError(absl::StrCat("-n ", Iterations(), " is not at least 1"));
  if (WarmupIterations() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("-w ", WarmupIterations(), " is not at least 0"));
  }
  for (const std::optional<int>& check : {absl::GetFlag(FLAGS_c), absl::GetFlag(FLAGS_check)}) {
    if (check && *check != 0 && *check != 1) {
      return absl::InvalidArgumentError(absl::StrCat("-c ", *check, " is not 0 or 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGivenFlags(const std::string& subcommand, const std::vector<std::string>& flags,
                             const std::vector<std::string>& known, const std::vector<std::string>& args) {
  const auto listed = [](const std::vector<std::string>& names, absl::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> ignored;
  for (absl::string_view arg : args) {
    if (arg == "--") break;  // what follows is no flag
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    absl::string_view name = arg.substr(0, arg.find('='));
    if (!listed(known, name) && absl::StartsWith(name, "no")) name.remove_prefix(2);  // --nojson
    if (!listed(known, name) || listed(flags, name)) continue;
    const std::string shown = absl::StrCat(name.size() == 1 ? "-" : "--", name);
    if (!listed(ignored, shown)) ignored.push_back(shown);
  }
  if (ignored.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(subcommand, " does not read ", absl::StrJoin(ignored, ", "), " (",
                                                 subcommand, " --help lists its flags)"));
}

std::vector<std::string> SharedFlags(std::initializer_list<FlagGroup> groups, std::vector<std::string> own) {
  for (FlagGroup group : groups) {
    std::vector<std::string> names = FlagsOf(group);
    own.insert(own.end(), names.begin(), names.end());
  }
  return own;
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (uint8_t v = 0; IsValidReduceOp(v); ++v) {
    if (name == ReduceOpName(static_cast<ReduceOp>(v))) return static_cast<ReduceOp>(v);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction '", name, "' (sum, prod, min, max or avg)"));
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  // nccl-tests' names too.
  const std::pair<const char*, DataType> kNcclNames[] = {
      {"bfloat16", DataType::kBFloat16}, {"half", DataType::kFloat16},       {"float16", DataType::kFloat16},
      {"float", DataType::kFloat32},     {"float32", DataType::kFloat32},    {"double", DataType::kFloat64},
      {"float64", DataType::kFloat64},   {"f8e4m3", DataType::kFloat8E4M3}, {"f8e5m2", DataType::kFloat8E5M2},
      {"int8", DataType::kInt8}};
  for (const auto& [nccl, type] : kNcclNames) {
    if (name == nccl) return type;
  }
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    auto type = static_cast<DataType>(v);
    if (name == DataTypeName(type)) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown --dtype '", name, "'"));
}

}  // namespace ucclzip::bench
