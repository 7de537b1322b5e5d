// nccl_driver: NCCL's collectives and a send/recv ring in nccl-tests' conventions, written
// against nccl.h and the CUDA runtime alone, so that one source measures NVIDIA's libnccl.so
// (nccl_driver) and ucclzip's NCCL API, libucclzip_nccl.so (nccl_driver_ucclzip), beside
// `ucclzip-bench` in the same run (benchmarks/gpu/multi-gpu.sh, docs/MULTI_GPU.md).
//
//   nccl_driver allreduce|allgather|reducescatter|broadcast|reduce|sendrecv [flags]
//
// One process per rank: RANK/WORLD_SIZE (or UCCLZIP_RANK/UCCLZIP_WORLD_SIZE), device = local
// rank (LOCAL_RANK, UCCLZIP_LOCAL_RANK, else the rank) modulo the visible devices. Rank 0 writes
// the ncclUniqueId to NCCL_DRIVER_ID_FILE (a temporary name renamed into place, so that nobody
// reads half an id) and removes it once every rank has joined; the others poll for it.
//
//   size   nccl-tests' size: count x type for allreduce, broadcast, reduce and sendrecv (one
//          message), the gathered buffer for allgather, the whole input for reducescatter.
//   time   CUDA events around -n back-to-back calls on one stream after -w warm-up calls, divided
//          by -n; the slowest rank's (an allreduce of the times, through the library measured).
//   busbw  algbw x factor: allreduce 2(n-1)/n; allgather, reducescatter (n-1)/n; broadcast,
//          reduce, sendrecv 1.
//   #wrong with -c 1, one more call into a cleared buffer; the elements (not bytes, as nccl-tests
//          counts) that differ from the exact result, summed over the ranks. Inputs are small
//          integers, so every sum of up to 32 ranks is exact in bf16, fp16 and fp32 in any
//          order: the expected bits do not depend on the library's algorithm.
#define _GNU_SOURCE  // getopt_long, nanosleep
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

// The library linked in, for the output ("nccl" or "ucclzip_nccl"); CMake sets it.
#ifndef NCCL_DRIVER_LIBRARY
#define NCCL_DRIVER_LIBRARY "nccl"
#endif

enum { kExitUsage = 2, kMaxCheckedRanks = 32 };

typedef enum { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kSendRecv, kOps } Op;
static const char* const kOpNames[kOps] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv"};

typedef struct {
  const char* name;
  ncclDataType_t nccl;
  size_t bytes;
} Type;
static const Type kTypes[] = {{"bf16", ncclBfloat16, 2}, {"fp16", ncclFloat16, 2}, {"fp32", ncclFloat32, 4}};
// nccl-tests' names of the same types.
static const struct {
  const char* alias;
  const char* name;
} kTypeAliases[] = {{"bfloat16", "bf16"}, {"half", "fp16"}, {"float16", "fp16"}, {"float", "fp32"}, {"float32", "fp32"}};

typedef struct {
  Op op;
  const Type* type;
  uint64_t min_bytes, max_bytes;
  double factor;
  int iters, warmup, root, check, json;
} Options;

typedef struct {
  int rank, world, local_rank, device;
} Place;

// What a failure message names: the rank, the operation and its size.
static struct {
  Place place;
  const char* op;
  const char* type;
  uint64_t bytes;
  ncclComm_t comm;
} where = {{0, 1, 0, -1}, "setup", "", 0, NULL};

static void Fail(int code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "nccl_driver: rank %d of %d: %s", where.place.rank, where.place.world, where.op);
  if (where.bytes > 0) fprintf(stderr, " (%" PRIu64 " bytes of %s)", where.bytes, where.type);
  fputs(": ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  // The peers would wait for this rank forever; NCCL's abort tells them where it can.
  if (where.comm != NULL) ncclCommAbort(where.comm);
  exit(code);
}

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) Fail(1, "%s: CUDA error %s: %s", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
  } while (0)
#define CHECK_NCCL(call)                                                                       \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess) Fail(1, "%s: %s (%s)", #call, ncclGetErrorString(r_), ncclGetLastError(where.comm)); \
  } while (0)

static void Usage(FILE* out) {
  fputs("usage: nccl_driver allreduce|allgather|reducescatter|broadcast|reduce|sendrecv [flags]\n"
        "  -b, --minbytes SIZE     smallest size (K/M/G = powers of 1024; default 32M)\n"
        "  -e, --maxbytes SIZE     largest size (default 32M)\n"
        "  -f, --stepfactor F      size multiplier from one size to the next (default 2)\n"
        "  -n, --iters N           timed calls per size (default 20)\n"
        "  -w, --warmup_iters N    untimed calls before them (default 5)\n"
        "  -d, --datatype T        bf16|fp16|fp32 (or bfloat16, half, float; default bf16)\n"
        "  -o, --op OP             sum (the only reduction whose exact result -c knows)\n"
        "  -r, --root R            root of broadcast and reduce (default 0)\n"
        "  -c, --check 0|1         check every result exactly (default 1)\n"
        "      --json              one JSON object per size instead of the table\n"
        "  -h, --help              this text\n"
        "environment: RANK, WORLD_SIZE (or UCCLZIP_RANK, UCCLZIP_WORLD_SIZE; default rank 0 of 1),\n"
        "  LOCAL_RANK (or UCCLZIP_LOCAL_RANK), NCCL_DRIVER_ID_FILE (needed for 2 ranks or more; must\n"
        "  not exist yet), NCCL_DRIVER_TIMEOUT (seconds to wait for the id and for a call; default 300)\n",
        out);
}

static void UsageError(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("nccl_driver: ", stderr);
  vfprintf(stderr, format, args);
  fputs(" (--help lists the flags)\n", stderr);
  va_end(args);
  exit(kExitUsage);
}

static uint64_t ParseSize(const char* flag, const char* text) {
  char* end = NULL;
  errno = 0;
  const unsigned long long value = strtoull(text, &end, 10);
  uint64_t scale = 1;
  if (end != text && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': scale = 1ull << 10; ++end; break;
      case 'M': case 'm': scale = 1ull << 20; ++end; break;
      case 'G': case 'g': scale = 1ull << 30; ++end; break;
      default: break;
    }
  }
  if (end == text || *end != '\0' || errno != 0 || text[0] == '-' || value > UINT64_MAX / scale) {
    UsageError("%s '%s' is not a size (a number of bytes, optionally K, M or G)", flag, text);
  }
  return value * scale;
}

static long ParseInt(const char* flag, const char* text, long min, long max) {
  char* end = NULL;
  errno = 0;
  const long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < min || value > max) {
    UsageError("%s '%s' is not an integer in [%ld, %ld]", flag, text, min, max);
  }
  return value;
}

static const Type* ParseType(const char* text) {
  const char* name = text;
  for (size_t i = 0; i < sizeof kTypeAliases / sizeof kTypeAliases[0]; ++i) {
    if (strcmp(text, kTypeAliases[i].alias) == 0) name = kTypeAliases[i].name;
  }
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i) {
    if (strcmp(name, kTypes[i].name) == 0) return &kTypes[i];
  }
  UsageError("-d '%s': the types are bf16, fp16 and fp32", text);
  return NULL;
}

static Options ParseArgs(int argc, char** argv) {
  Options o = {.type = &kTypes[0], .min_bytes = 32u << 20, .max_bytes = 32u << 20, .factor = 2, .iters = 20,
               .warmup = 5, .root = 0, .check = 1, .json = 0};
  static const struct option kLong[] = {
      {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'}, {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'}, {"root", required_argument, NULL, 'r'},
      {"check", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0;  // our messages, not getopt's
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:n:w:d:o:r:c:h", kLong, NULL)) != -1) {
    switch (c) {
      case 'b': o.min_bytes = ParseSize("-b", optarg); break;
      case 'e': o.max_bytes = ParseSize("-e", optarg); break;
      case 'f': {
        char* end = NULL;
        o.factor = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o.factor >= 1)) UsageError("-f '%s' is not a factor of 1 or more", optarg);
        break;
      }
      case 'n': o.iters = (int)ParseInt("-n", optarg, 1, 1000000); break;
      case 'w': o.warmup = (int)ParseInt("-w", optarg, 0, 1000000); break;
      case 'd': o.type = ParseType(optarg); break;
      case 'o':
        if (strcmp(optarg, "sum") != 0) UsageError("-o '%s': only sum is supported", optarg);
        break;
      case 'r': o.root = (int)ParseInt("-r", optarg, 0, 1 << 30); break;
      case 'c': o.check = (int)ParseInt("-c", optarg, 0, 1); break;
      case 'j': o.json = 1; break;
      case 'h': Usage(stdout); exit(0);
      case ':': UsageError("%s needs a value", argv[optind - 1]); break;
      default: UsageError("unknown flag '%s'", argv[optind - 1]); break;
    }
  }
  if (optind != argc - 1) {
    UsageError(optind == argc ? "no operation given" : "one operation expected, got '%s' and more", argv[optind]);
  }
  for (o.op = 0; o.op < kOps && strcmp(argv[optind], kOpNames[o.op]) != 0; ++o.op) {
  }
  if (o.op == kOps) UsageError("unknown operation '%s'", argv[optind]);
  if (o.min_bytes > o.max_bytes) UsageError("-b %" PRIu64 " is larger than -e %" PRIu64, o.min_bytes, o.max_bytes);
  return o;
}

// An environment variable as a number, from the first of `names` that is set; `fallback` if none.
static int EnvInt(const char* const* names, int count, int fallback) {
  for (int i = 0; i < count; ++i) {
    const char* text = getenv(names[i]);
    if (text == NULL) continue;
    char* end = NULL;
    errno = 0;
    const long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || value < 0 || value > (1 << 30)) {
      UsageError("%s='%s' is not a non-negative integer", names[i], text);
    }
    return (int)value;
  }
  return fallback;
}

static Place PlaceFromEnvironment(const Options* o) {
  static const char* const kRank[] = {"RANK", "UCCLZIP_RANK"};
  static const char* const kWorld[] = {"WORLD_SIZE", "UCCLZIP_WORLD_SIZE"};
  static const char* const kLocal[] = {"LOCAL_RANK", "UCCLZIP_LOCAL_RANK"};
  Place p = {.device = -1};
  p.rank = EnvInt(kRank, 2, 0);
  p.world = EnvInt(kWorld, 2, 1);
  p.local_rank = EnvInt(kLocal, 2, p.rank);
  if (p.world < 1 || p.rank >= p.world) UsageError("rank %d is not a rank of a world of %d", p.rank, p.world);
  if (o->root >= p.world) UsageError("-r %d is not a rank of %d", o->root, p.world);
  if (p.world > 1 && getenv("NCCL_DRIVER_ID_FILE") == NULL) {
    UsageError("rank %d of %d: set NCCL_DRIVER_ID_FILE to a path the ranks share for the ncclUniqueId", p.rank,
               p.world);
  }
  if (o->check && p.world > kMaxCheckedRanks) {
    UsageError("-c 1 knows exact bf16 sums of up to %d ranks, not %d (use -c 0)", kMaxCheckedRanks, p.world);
  }
  return p;
}

static double Seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static void Nap(void) {
  const struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
}

static ncclUniqueId ShareUniqueId(const Place* p, int timeout_s) {
  ncclUniqueId id;
  if (p->world == 1) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    return id;
  }
  const char* path = getenv("NCCL_DRIVER_ID_FILE");
  if (p->rank == 0) {
    // An id left by an earlier run would be read by the other ranks before this one replaced it.
    if (access(path, F_OK) == 0) {
      Fail(kExitUsage, "NCCL_DRIVER_ID_FILE %s exists already (an earlier run's?): remove it", path);
    }
    CHECK_NCCL(ncclGetUniqueId(&id));
    char partial[4096];
    snprintf(partial, sizeof partial, "%s.partial.%ld", path, (long)getpid());
    FILE* file = fopen(partial, "wb");
    if (file == NULL || fwrite(&id, sizeof id, 1, file) != 1 || fclose(file) != 0 || rename(partial, path) != 0) {
      Fail(1, "writing the ncclUniqueId to %s: %s", path, strerror(errno));
    }
    return id;
  }
  const double deadline = Seconds() + timeout_s;
  for (;;) {
    FILE* file = fopen(path, "rb");
    if (file != NULL) {
      const size_t got = fread(&id, sizeof id, 1, file);
      fclose(file);
      if (got == 1) return id;
      Fail(1, "NCCL_DRIVER_ID_FILE %s holds no whole ncclUniqueId (%zu bytes expected)", path, sizeof id);
    }
    if (errno != ENOENT) Fail(1, "reading NCCL_DRIVER_ID_FILE %s: %s", path, strerror(errno));
    if (Seconds() > deadline) {
      Fail(1, "no ncclUniqueId in NCCL_DRIVER_ID_FILE %s after %d s (is rank 0 running with the same path?)", path,
           timeout_s);
    }
    Nap();
  }
}

// Waits for the stream while watching the communicator: a failed or vanished peer shows as an
// asynchronous error (or as no progress until the deadline) instead of a hang.
static void WaitStream(cudaStream_t stream, int timeout_s, const char* what) {
  const double deadline = Seconds() + timeout_s;
  for (;;) {
    const cudaError_t done = cudaStreamQuery(stream);
    if (done == cudaSuccess) return;
    if (done != cudaErrorNotReady) CHECK_CUDA(done);
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(where.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      Fail(1, "%s: asynchronous error %s (%s)", what, ncclGetErrorString(async), ncclGetLastError(where.comm));
    }
    if (Seconds() > deadline) Fail(1, "%s: not done after %d s", what, timeout_s);
    Nap();
  }
}

// The element counts of one size, in NCCL's arguments.
typedef struct {
  size_t count;        // NCCL's count argument
  size_t send, recv;   // elements in the send and receive buffers
  uint64_t bytes;      // nccl-tests' size of this count
} Shape;

static Shape ShapeOf(Op op, uint64_t bytes, const Type* type, int world) {
  const size_t elements = bytes / type->bytes;
  Shape s = {.count = elements, .send = elements, .recv = elements};
  if (op == kAllGather || op == kReduceScatter) {
    s.count = elements / world;
    s.send = op == kAllGather ? s.count : s.count * world;
    s.recv = op == kAllGather ? s.count * world : s.count;
  }
  s.bytes = (uint64_t)(op == kAllGather ? s.recv : s.send) * type->bytes;
  return s;
}

static double BusFactor(Op op, int world) {
  switch (op) {
    case kAllReduce: return 2.0 * (world - 1) / world;
    case kAllGather:
    case kReduceScatter: return (double)(world - 1) / world;
    default: return 1;
  }
}

// Input element `index` of `rank`: an integer in [-8, 8], never all zero.
static int Value(int rank, uint64_t index) { return (int)((index * 7 + (uint64_t)rank * 5) % 17) - 8; }

static int SumOverRanks(int world, uint64_t index) {
  int sum = 0;
  for (int r = 0; r < world; ++r) sum += Value(r, index);
  return sum;
}

// The element of integer `k` (|k| <= 256, exact in every type), as bits.
static uint32_t Encode(const Type* type, int k) {
  const float f = (float)k;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (type->nccl == ncclFloat32) return bits;
  if (type->nccl == ncclBfloat16) return bits >> 16;
  if (k == 0) return 0;
  // fp16: the same sign and exponent rebiased from 127 to 15, the top 10 mantissa bits.
  return (bits >> 16 & 0x8000u) | (((bits >> 23 & 0xffu) - 112u) << 10) | (bits >> 13 & 0x3ffu);
}

static void Store(const Type* type, void* buffer, size_t index, uint32_t bits) {
  if (type->bytes == 2) {
    ((uint16_t*)buffer)[index] = (uint16_t)bits;
  } else {
    ((uint32_t*)buffer)[index] = bits;
  }
}

static uint32_t Load(const Type* type, const void* buffer, size_t index) {
  return type->bytes == 2 ? ((const uint16_t*)buffer)[index] : ((const uint32_t*)buffer)[index];
}

// The exact value of output element `index` on `rank`.
static int Expected(Op op, const Shape* s, int rank, int world, int root, size_t index) {
  switch (op) {
    case kAllReduce:
    case kReduce: return SumOverRanks(world, index);
    case kAllGather: return Value((int)(index / s->count), index % s->count);
    case kReduceScatter: return SumOverRanks(world, (uint64_t)rank * s->count + index);
    case kBroadcast: return Value(root, index);
    default: return Value((rank + world - 1) % world, index);  // sendrecv: from the rank before
  }
}

static void Launch(const Options* o, const Shape* s, const void* send, void* recv, cudaStream_t stream) {
  const ncclDataType_t t = o->type->nccl;
  ncclComm_t comm = where.comm;
  switch (o->op) {
    case kAllReduce: CHECK_NCCL(ncclAllReduce(send, recv, s->count, t, ncclSum, comm, stream)); break;
    case kAllGather: CHECK_NCCL(ncclAllGather(send, recv, s->count, t, comm, stream)); break;
    case kReduceScatter: CHECK_NCCL(ncclReduceScatter(send, recv, s->count, t, ncclSum, comm, stream)); break;
    case kBroadcast: CHECK_NCCL(ncclBroadcast(send, recv, s->count, t, o->root, comm, stream)); break;
    case kReduce: CHECK_NCCL(ncclReduce(send, recv, s->count, t, ncclSum, o->root, comm, stream)); break;
    default: {
      const int rank = where.place.rank, world = where.place.world;
      CHECK_NCCL(ncclGroupStart());
      CHECK_NCCL(ncclSend(send, s->count, t, (rank + 1) % world, comm, stream));
      CHECK_NCCL(ncclRecv(recv, s->count, t, (rank + world - 1) % world, comm, stream));
      CHECK_NCCL(ncclGroupEnd());
      break;
    }
  }
}

// One value of every rank combined by `op` (max or sum) through the library measured. The copies
// are synchronous and the allreduce is waited for by WaitStream, whose deadline a lost peer meets.
static double AcrossRanks(double mine, ncclRedOp_t op, double* scratch, cudaStream_t stream, int timeout_s) {
  CHECK_CUDA(cudaMemcpy(scratch, &mine, sizeof mine, cudaMemcpyHostToDevice));
  CHECK_NCCL(ncclAllReduce(scratch, scratch, 1, ncclFloat64, op, where.comm, stream));
  WaitStream(stream, timeout_s, "combining the ranks' figures");
  CHECK_CUDA(cudaMemcpy(&mine, scratch, sizeof mine, cudaMemcpyDeviceToHost));
  return mine;
}

typedef struct {
  double time_us;
  uint64_t wrong;
} Result;

static uint64_t CountWrong(const Options* o, const Shape* s, void* recv, cudaStream_t stream, const void* send,
                           int timeout_s) {
  const Place* p = &where.place;
  if (o->op == kReduce && p->rank != o->root) return 0;  // only the root's buffer is defined
  const size_t bytes = s->recv * o->type->bytes;
  void* host = malloc(bytes > 0 ? bytes : 1);
  if (host == NULL) Fail(1, "no host memory for the %zu bytes to check", bytes);
  CHECK_CUDA(cudaMemsetAsync(recv, 0xA5, bytes, stream));  // 0xA5A5 is no small integer in any type
  Launch(o, s, send, recv, stream);
  WaitStream(stream, timeout_s, "the checked call");
  CHECK_CUDA(cudaMemcpy(host, recv, bytes, cudaMemcpyDeviceToHost));
  uint64_t wrong = 0;
  for (size_t i = 0; i < s->recv; ++i) {
    wrong += Load(o->type, host, i) != Encode(o->type, Expected(o->op, s, p->rank, p->world, o->root, i));
  }
  free(host);
  return wrong;
}

static Result MeasureSize(const Options* o, const Shape* s, const void* send, void* recv, double* scratch,
                          cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, int timeout_s) {
  for (int i = 0; i < o->warmup; ++i) Launch(o, s, send, recv, stream);
  WaitStream(stream, timeout_s, "the warm-up calls");
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < o->iters; ++i) Launch(o, s, send, recv, stream);
  CHECK_CUDA(cudaEventRecord(stop, stream));
  WaitStream(stream, timeout_s, "the timed calls");
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  Result r = {.time_us = AcrossRanks(ms * 1e3 / o->iters, ncclMax, scratch, stream, timeout_s)};
  if (o->check) {
    const double wrong = (double)CountWrong(o, s, recv, stream, send, timeout_s);
    r.wrong = (uint64_t)AcrossRanks(wrong, ncclSum, scratch, stream, timeout_s);
  }
  return r;
}

static void PrintResult(const Options* o, const Shape* s, const Result* r, int world, int version) {
  const int reduces = o->op == kAllReduce || o->op == kReduceScatter || o->op == kReduce;
  const int root = o->op == kBroadcast || o->op == kReduce ? o->root : -1;
  const double algbw = r->time_us > 0 ? (double)s->bytes / r->time_us / 1e3 : 0;
  const double busbw = algbw * BusFactor(o->op, world);
  if (o->json) {
    printf("{\"bench\":\"%s\",\"size\":%" PRIu64 ",\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,"
           "\"time_us\":%.2f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"wrong\":%" PRIu64 ",\"ranks\":%d,"
           "\"library\":\"%s\",\"nccl_version\":%d,\"iters\":%d,\"warmup\":%d,\"check\":%d}\n",
           kOpNames[o->op], s->bytes, s->count, o->type->name, reduces ? "sum" : "none", root, r->time_us, algbw,
           busbw, r->wrong, world, NCCL_DRIVER_LIBRARY, version, o->iters, o->warmup, o->check);
  } else {
    char wrong[24] = "N/A";
    if (o->check) snprintf(wrong, sizeof wrong, "%" PRIu64, r->wrong);
    printf("%12" PRIu64 " %12zu %8s %6s %5d %11.1f %11.3f %11.3f %7s\n", s->bytes, s->count, o->type->name,
           reduces ? "sum" : "none", root, r->time_us, algbw, busbw, wrong);
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  where.place = PlaceFromEnvironment(&o);
  Place* p = &where.place;
  static const char* const kTimeout[] = {"NCCL_DRIVER_TIMEOUT"};
  const int timeout_s = EnvInt(kTimeout, 1, 300);

  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    Fail(1, "no usable CUDA device (%s): NCCL needs one per rank",
         counted != cudaSuccess ? cudaGetErrorString(counted) : "none visible");
  }
  p->device = p->local_rank % devices;
  CHECK_CUDA(cudaSetDevice(p->device));
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, p->device));
  fprintf(stderr, "nccl_driver: rank %d of %d on cuda:%d (%s, PCI %04x:%02x:%02x), %s\n", p->rank, p->world, p->device,
          prop.name, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, NCCL_DRIVER_LIBRARY);

  where.op = "ncclCommInitRank";
  const ncclUniqueId id = ShareUniqueId(p, timeout_s);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, p->world, id, p->rank));
  where.comm = comm;
  // Every rank has joined: the id has served its one communicator.
  if (p->rank == 0 && p->world > 1) unlink(getenv("NCCL_DRIVER_ID_FILE"));
  int version = 0;
  CHECK_NCCL(ncclGetVersion(&version));

  where.op = kOpNames[o.op];
  where.type = o.type->name;
  const Shape largest = ShapeOf(o.op, o.max_bytes, o.type, p->world);
  void *send = NULL, *recv = NULL;
  double* scratch = NULL;
  CHECK_CUDA(cudaMalloc(&send, largest.send * o.type->bytes + 1));
  CHECK_CUDA(cudaMalloc(&recv, largest.recv * o.type->bytes + 1));
  CHECK_CUDA(cudaMalloc((void**)&scratch, sizeof *scratch));
  {
    // The inputs of every size are prefixes of the largest one's (values depend on the index only).
    void* host = malloc(largest.send * o.type->bytes + 1);
    if (host == NULL) Fail(1, "no host memory for the %zu-element input", largest.send);
    for (size_t i = 0; i < largest.send; ++i) Store(o.type, host, i, Encode(o.type, Value(p->rank, i)));
    CHECK_CUDA(cudaMemcpy(send, host, largest.send * o.type->bytes, cudaMemcpyHostToDevice));
    free(host);
  }
  cudaStream_t stream;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  const int report = p->rank == 0;
  if (report && !o.json) {
    printf("# nccl_driver %s: %s (NCCL_VERSION_CODE %d), %d ranks, device buffers, iters %d, warmup %d, check %d\n",
           kOpNames[o.op], NCCL_DRIVER_LIBRARY, version, p->world, o.iters, o.warmup, o.check);
    printf("#%11s %12s %8s %6s %5s %11s %11s %11s %7s\n", "size", "count", "type", "redop", "root", "time(us)",
           "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  double busbw_sum = 0;
  int sizes = 0;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
    const Shape s = ShapeOf(o.op, bytes, o.type, p->world);
    where.bytes = s.bytes;
    const Result r = MeasureSize(&o, &s, send, recv, scratch, stream, start, stop, timeout_s);
    if (report) PrintResult(&o, &s, &r, p->world, version);
    busbw_sum += r.time_us > 0 ? (double)s.bytes / r.time_us / 1e3 * BusFactor(o.op, p->world) : 0;
    ++sizes;
    const uint64_t next = (uint64_t)((double)bytes * o.factor);
    if (o.factor <= 1 || next <= bytes) break;
    bytes = next;
  }
  if (report && !o.json) printf("# Avg bus bandwidth    : %.3f\n", sizes > 0 ? busbw_sum / sizes : 0);
  where.bytes = 0;
  where.op = "ncclCommDestroy";
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(send);
  cudaFree(recv);
  cudaFree(scratch);
  CHECK_NCCL(ncclCommDestroy(comm));
  where.comm = NULL;
  return 0;
}
