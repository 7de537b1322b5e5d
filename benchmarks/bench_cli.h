// Command-line vocabulary shared by every ucclzip-bench subcommand: sizes with K/M/G suffixes,
// element types by name, and the flags more than one subcommand reads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ucclzip/types.h"

namespace ucclzip::bench {

// A byte count written as 4096, 64K, 16M or 1G (powers of 1024).
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

// Our names (bf16, fp16, ...) and nccl-tests' (bfloat16, half, float, ...).
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// nccl-tests' flags, resolved against the older names they alias: -b/--minbytes,
// -e/--maxbytes, -f/--stepfactor, -n (--iters), -w/--warmup_iters (--warmup), -d/--datatype
// (--dtype), -o/--op, -r/--root, -c/--check. `fallback`: the subcommand's own default.
uint64_t MinBytes(uint64_t fallback);
uint64_t MaxBytes(uint64_t fallback);
double StepFactor();
// The size after `bytes` in a sweep (times the step factor; past the end after one size when
// the factor is 1 or less).
uint64_t NextSize(uint64_t bytes);
int Iterations();
int WarmupIterations();
// --warmup_ms: how long untimed calls go on before a size (or the codec's GPU work) is timed.
absl::Duration WarmupDuration();
std::string DataTypeFlag();
std::string ReduceOpFlag();
// --compress, or the subcommand's default list where it is unset.
std::string CompressFlag(const char* fallback);
int RootFlag();
bool CheckFlag();

// nccl-tests' sweep checked as nccl_driver checks it: -b at most -e (the subcommand's
// `min_bytes` and `max_bytes`, resolved), -f a factor of 1 or more, -n at least 1, -w at least
// 0, -c 0 or 1. A sweep that would measure nothing, or numbers of no iterations, is refused
// rather than run.
absl::Status CheckSweepFlags(uint64_t min_bytes, uint64_t max_bytes);

// Refuses a flag of `args` (the command line, "-x", "--name", "--name=value" or "--noname")
// that `subcommand` does not read (`flags`, its list) but another subcommand does (`known`, every
// subcommand's flags): it would otherwise be ignored without a word (weightsync -d fp16 measured
// bf16, sendrecv -c 0 still checked).
absl::Status CheckGivenFlags(const std::string& subcommand, const std::vector<std::string>& flags,
                             const std::vector<std::string>& known, const std::vector<std::string>& args);

// The flags above in groups, for the list of flags a subcommand registers (bench_registry.h):
//   kMeasure       --dtype --dist --iters --warmup --warmup_ms --json
//   kCommunicator  --ranks --memory --tls --compress --pipeline_block
//   kSweep         nccl-tests' sizes, iterations and type: -b -e -f -n -w -d and their long names
//   kReduction     nccl-tests' -o -r -c and their long names
enum class FlagGroup { kMeasure, kCommunicator, kSweep, kReduction };
// The names of `groups`' flags after the subcommand's `own`.
std::vector<std::string> SharedFlags(std::initializer_list<FlagGroup> groups, std::vector<std::string> own);

}  // namespace ucclzip::bench

ABSL_DECLARE_FLAG(std::string, dtype);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(int, iters);
ABSL_DECLARE_FLAG(int, warmup);
ABSL_DECLARE_FLAG(std::string, dist);
ABSL_DECLARE_FLAG(int, ranks);
ABSL_DECLARE_FLAG(std::string, memory);
ABSL_DECLARE_FLAG(std::string, tls);
ABSL_DECLARE_FLAG(std::string, compress);
ABSL_DECLARE_FLAG(ucclzip::bench::ByteSize, pipeline_block);
ABSL_DECLARE_FLAG(ucclzip::bench::ByteSize, min_pipeline_block);
ABSL_DECLARE_FLAG(ucclzip::bench::ByteSize, recursive_doubling);
ABSL_DECLARE_FLAG(ucclzip::bench::ByteSize, tree_broadcast);
ABSL_DECLARE_FLAG(int, cpu_codec_threads);
