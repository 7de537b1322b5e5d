/* An NCCL program in plain C, written against nccl.h alone, that CI runs on ucclzip's shim with
 * host buffers (the shim's extension: docs/NCCL_API.md). Every collective, a grouped send/recv
 * ring and a group of collectives, each checked element for element, then the error paths.
 * The inputs are small integers, so that every valid order of reduction gives the same bits.
 * Last, on a second communicator, one rank leaves and the others see ncclRemoteError.
 *
 *   nccl_api_test ID_FILE     one rank per process, UCCLZIP_RANK of UCCLZIP_WORLD_SIZE (as
 *                             scripts/ucclzip-run sets them). Rank 0 writes its ncclUniqueId to
 *                             ID_FILE and removes it once every rank has joined; the others
 *                             wait for it and read it.
 *   nccl_api_test --clique N  N ranks in this one process (ncclCommInitAll), driven from one
 *                             thread through groups.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank = -1;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "rank %d, line %d: ", rank, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                               \
      fputc('\n', stderr);                                        \
      exit(1);                                                    \
    }                                                             \
  } while (0)

#define NCCL_OK(call)                                                                             \
  do {                                                                                            \
    ncclResult_t result_ = (call);                                                                \
    CHECK(result_ == ncclSuccess, "%s: %s: %s", #call, ncclGetErrorString(result_), ncclGetLastError(NULL)); \
  } while (0)

/* The call must fail with `want`, and ncclGetLastError must say `text`. */
#define NCCL_FAILS(call, want, text)                                                              \
  do {                                                                                            \
    ncclResult_t result_ = (call);                                                                \
    CHECK(result_ == (want), "%s returned %s, not %s (last error \"%s\")", #call, ncclGetErrorString(result_),    \
          ncclGetErrorString(want), ncclGetLastError(NULL));                                             \
    CHECK(strstr(ncclGetLastError(NULL), (text)) != NULL, "%s: last error \"%s\" does not say \"%s\"", #call, \
          ncclGetLastError(NULL), (text));                                                        \
  } while (0)

static void* allocate(size_t bytes) {
  void* p = malloc(bytes > 0 ? bytes : 1);
  CHECK(p != NULL, "out of memory");
  return p;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* bf16 keeps a float's upper 16 bits: exact for the small integers used here. */
static uint16_t to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return (uint16_t)(bits >> 16);
}

static float from_bf16(uint16_t bits16) {
  uint32_t bits = (uint32_t)bits16 << 16;
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

static int env_int(const char* name) {
  const char* value = getenv(name);
  CHECK(value != NULL, "%s is not set: start the ranks with scripts/ucclzip-run", name);
  return atoi(value);
}

/* Rank 0 makes the id and publishes it atomically; the others wait for it (60 s). */
static ncclUniqueId share_id(const char* path) {
  ncclUniqueId id;
  if (rank == 0) {
    char partial[4096];
    snprintf(partial, sizeof(partial), "%s.partial", path);
    NCCL_OK(ncclGetUniqueId(&id));
    FILE* f = fopen(partial, "wb");
    CHECK(f != NULL && fwrite(&id, sizeof(id), 1, f) == 1 && fclose(f) == 0, "cannot write %s", partial);
    CHECK(rename(partial, path) == 0, "cannot rename %s to %s", partial, path);
    return id;
  }
  for (int waited = 0; waited < 6000; ++waited, sleep_ms(10)) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) continue;
    const size_t got = fread(&id, sizeof(id), 1, f);
    fclose(f);
    if (got == 1) return id;
  }
  CHECK(0, "no unique id in %s after 60 s", path);
  return id;
}

static void test_allreduce(ncclComm_t comm, int world) {
  const size_t count = 100003;
  float* in = allocate(count * sizeof(float));
  float* out = allocate(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) in[i] = (float)((rank + 1) * (int)(i % 13 + 1));
  NCCL_OK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    const float want = (float)(world * (world + 1) / 2 * (int)(i % 13 + 1));
    CHECK(out[i] == want, "allreduce sum: element %zu is %g, not %g", i, out[i], want);
  }
  /* bf16 max, in place. */
  const size_t small = 4099;
  uint16_t* values = allocate(small * sizeof(uint16_t));
  for (size_t i = 0; i < small; ++i) values[i] = to_bf16((float)(rank + 1 + (int)(i % 5)));
  NCCL_OK(ncclAllReduce(values, values, small, ncclBfloat16, ncclMax, comm, NULL));
  for (size_t i = 0; i < small; ++i) {
    CHECK(from_bf16(values[i]) == (float)(world + (int)(i % 5)), "allreduce bf16 max: element %zu is %g", i,
          from_bf16(values[i]));
  }
  /* int64 min. */
  int64_t* ints = allocate(small * sizeof(int64_t));
  int64_t* least = allocate(small * sizeof(int64_t));
  for (size_t i = 0; i < small; ++i) ints[i] = (int64_t)(i % 7) * 10 - rank;
  NCCL_OK(ncclAllReduce(ints, least, small, ncclInt64, ncclMin, comm, NULL));
  for (size_t i = 0; i < small; ++i) {
    CHECK(least[i] == (int64_t)(i % 7) * 10 - (world - 1), "allreduce int64 min: element %zu is %lld", i,
          (long long)least[i]);
  }
  free(in), free(out), free(values), free(ints), free(least);
}

static void test_allgather(ncclComm_t comm, int world) {
  const size_t count = 1001;
  int32_t* in = allocate(count * sizeof(int32_t));
  int32_t* out = allocate(world * count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) in[i] = rank * 100000 + (int32_t)i;
  NCCL_OK(ncclAllGather(in, out, count, ncclInt32, comm, NULL));
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < count; ++i) {
      CHECK(out[r * count + i] == r * 100000 + (int32_t)i, "allgather: rank %d's element %zu is %d", r, i,
            out[r * count + i]);
    }
  }
  free(in), free(out);
}

static void test_reducescatter(ncclComm_t comm, int world) {
  const size_t count = 2001;
  float* in = allocate(world * count * sizeof(float));
  float* out = allocate(count * sizeof(float));
  for (size_t j = 0; j < world * count; ++j) in[j] = (float)((rank + 1) * (int)(j % 11 + 1));
  NCCL_OK(ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    const float want = (float)(world * (world + 1) / 2 * (int)((rank * count + i) % 11 + 1));
    CHECK(out[i] == want, "reducescatter: element %zu is %g, not %g", i, out[i], want);
  }
  free(in), free(out);
}

/* Any bit pattern, NaNs included, arrives exactly: compression is lossless. */
static void test_broadcast(ncclComm_t comm, int world) {
  const size_t count = 30011;
  const int root = world - 1;
  uint16_t* buffer = allocate(count * sizeof(uint16_t));
  uint32_t state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    buffer[i] = rank == root ? (uint16_t)(state >> 16) : 0;
  }
  NCCL_OK(ncclBroadcast(buffer, buffer, count, ncclFloat16, root, comm, NULL));
  state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    CHECK(buffer[i] == (uint16_t)(state >> 16), "broadcast: element %zu is 0x%04x", i, buffer[i]);
  }
  free(buffer);
}

/* Average to one root; the others pass no receive buffer, as NCCL allows. */
static void test_reduce(ncclComm_t comm, int world) {
  const size_t count = 30001;
  const int root = 1 % world;
  float* in = allocate(count * sizeof(float));
  float* out = rank == root ? allocate(count * sizeof(float)) : NULL;
  for (size_t i = 0; i < count; ++i) in[i] = (float)((rank + 1) * (int)(i % 13 + 1));
  NCCL_OK(ncclReduce(in, out, count, ncclFloat32, ncclAvg, root, comm, NULL));
  if (rank == root) {
    for (size_t i = 0; i < count; ++i) {
      const float want = (float)((world + 1) * (int)(i % 13 + 1)) / 2.0f;
      CHECK(out[i] == want, "reduce avg: element %zu is %g, not %g", i, out[i], want);
    }
  }
  free(in), free(out);
}

/* Every rank sends to the next and receives from the previous, in one group; then an
 * all-to-all of sends and receives, each rank's own share included, as PyTorch builds it. */
static void test_sendrecv(ncclComm_t comm, int world) {
  const size_t count = 7777;
  float* out = allocate(count * sizeof(float));
  float* in = allocate(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) out[i] = (float)(rank * 10000 + (int)i);
  const int next = (rank + 1) % world, previous = (rank + world - 1) % world;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(out, count, ncclFloat32, next, comm, NULL));
  NCCL_OK(ncclRecv(in, count, ncclFloat32, previous, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  for (size_t i = 0; i < count; ++i) {
    CHECK(in[i] == (float)(previous * 10000 + (int)i), "recv from %d: element %zu is %g", previous, i, in[i]);
  }
  free(out), free(in);

  const size_t share = 1001;
  int32_t* send = allocate(world * share * sizeof(int32_t));
  int32_t* recv = allocate(world * share * sizeof(int32_t));
  for (int to = 0; to < world; ++to) {
    for (size_t i = 0; i < share; ++i) send[to * share + i] = rank * 1000000 + to * 10000 + (int32_t)i;
  }
  NCCL_OK(ncclGroupStart());
  for (int peer = 0; peer < world; ++peer) {
    NCCL_OK(ncclSend(send + peer * share, share, ncclInt32, peer, comm, NULL));
    NCCL_OK(ncclRecv(recv + peer * share, share, ncclInt32, peer, comm, NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (int from = 0; from < world; ++from) {
    for (size_t i = 0; i < share; ++i) {
      const int32_t want = from * 1000000 + rank * 10000 + (int32_t)i;
      CHECK(recv[from * share + i] == want, "all-to-all from %d: element %zu is %d, not %d", from, i,
            recv[from * share + i], want);
    }
  }
  free(send), free(recv);
}

/* Bad arguments fail at once with ncclInvalidArgument and say why; the communicator goes on. */
static void test_errors(ncclComm_t comm, int world) {
  float values[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  float out[16];
  char text[64];
  NCCL_FAILS(ncclAllReduce(values, out, 16, (ncclDataType_t)99, ncclSum, comm, NULL), ncclInvalidArgument,
             "datatype 99 is not an ncclDataType_t");
  NCCL_FAILS(ncclAllReduce(values, out, 16, ncclFloat32, ncclNumOps, comm, NULL), ncclInvalidArgument,
             "reduction operator 5");
  NCCL_FAILS(ncclAllReduce(NULL, out, 16, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "null buffer");
  NCCL_FAILS(ncclAllReduce(values, values + 2, 8, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "overlaps");
  snprintf(text, sizeof(text), "root %d is not a rank of %d", world, world);
  NCCL_FAILS(ncclBroadcast(values, values, 16, ncclFloat32, world, comm, NULL), ncclInvalidArgument, text);
  NCCL_FAILS(ncclReduce(values, out, 16, ncclFloat32, ncclSum, -1, comm, NULL), ncclInvalidArgument,
             "root -1 is not a rank");
  snprintf(text, sizeof(text), "peer %d must be a rank of %d", world, world);
  NCCL_FAILS(ncclSend(values, 16, ncclFloat32, world, comm, NULL), ncclInvalidArgument, text);
  /* A send to itself is a copy with its ncclRecv, which only a group can pair it with. */
  NCCL_FAILS(ncclSend(values, 16, ncclFloat32, rank, comm, NULL), ncclInvalidArgument, "must be in a group");
  NCCL_FAILS(ncclAllGather(values, out, 1, ncclFloat32, NULL, NULL), ncclInvalidArgument, "comm is NULL");
  NCCL_FAILS(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  ncclRedOp_t premul;
  NCCL_FAILS(ncclRedOpCreatePreMulSum(&premul, values, ncclFloat32, ncclScalarHostImmediate, comm), ncclInvalidUsage,
             "ncclRedOpCreatePreMulSum is not supported");
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  NCCL_FAILS(ncclCommInitRank(NULL, world, id, rank), ncclInvalidArgument, "comm is NULL");
  ncclComm_t other;
  NCCL_FAILS(ncclCommInitRank(&other, world, id, world), ncclInvalidArgument, "is not a rank of a world");
  CHECK(other == NULL, "a failed ncclCommInitRank left a communicator");
  ncclConfig_t config;
  memset(&config, 0, sizeof(config));
  NCCL_FAILS(ncclCommInitRankConfig(&other, world, id, rank, &config), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  for (int code = ncclSuccess; code < ncclNumResults; ++code) {
    const char* text_of_code = ncclGetErrorString((ncclResult_t)code);
    CHECK(text_of_code != NULL && text_of_code[0] != '\0', "ncclGetErrorString(%d) is empty", code);
  }
  ncclResult_t async_error = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async_error));
  CHECK(async_error == ncclSuccess, "async error %s after argument errors", ncclGetErrorString(async_error));
  /* Still usable. */
  NCCL_OK(ncclAllReduce(values, out, 16, ncclFloat32, ncclMax, comm, NULL));
  CHECK(out[15] == 16.0f, "allreduce after the errors: %g", out[15]);
}

/* The last rank leaves without a word; the others' next collective fails with ncclRemoteError
 * naming it, the communicator reports it as its async error, and ncclCommAbort ends it. Even
 * ranks call 500 ms after the exit, odd ranks at once, so that the calls meet the exit at
 * different moments: a call may already have failed by the time ncclAllReduce looks at it
 * after posting, and such a call once left the async error unset (this test failed in CI). */
static void test_peer_exit(ncclComm_t comm, int world) {
  /* It leaves once every other rank has said it is ready: no collective of theirs is then
   * still waiting for it to finish. */
  int ready[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(world <= 8, "the peer-exit test takes up to 8 ranks");
  if (rank == world - 1) {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < world - 1; ++r) NCCL_OK(ncclRecv(&ready[r], 1, ncclInt32, r, comm, NULL));
    NCCL_OK(ncclGroupEnd());
    _exit(0);
  }
  NCCL_OK(ncclSend(&ready[rank], 1, ncclInt32, world - 1, comm, NULL));
  if (rank % 2 == 0) sleep_ms(500);
  float values[64];
  for (int i = 0; i < 64; ++i) values[i] = (float)(rank + i);
  char text[32];
  snprintf(text, sizeof(text), "peer %d", world - 1);
  NCCL_FAILS(ncclAllReduce(values, values, 64, ncclFloat32, ncclSum, comm, NULL), ncclRemoteError, text);
  ncclResult_t async_error = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comm, &async_error));
  CHECK(async_error == ncclRemoteError, "async error %s after a peer left", ncclGetErrorString(async_error));
  if (rank == 0) printf("rank 0, after rank %d left: %s\n", world - 1, ncclGetLastError(comm));
  /* An aborted communicator leaves at once, without waiting for its peers: were the odd ranks
   * to leave before the even ranks' calls met the exit, those calls would name them instead. */
  sleep_ms(1500);
  NCCL_OK(ncclCommAbort(comm));
}

static int run_ranks(const char* id_path) {
  rank = env_int("UCCLZIP_RANK");
  const int world = env_int("UCCLZIP_WORLD_SIZE");
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "ncclGetVersion says %d, nccl.h %d", version, NCCL_VERSION_CODE);
  const ncclUniqueId id = share_id(id_path);
  ncclComm_t comm = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NCCL_OK(ncclCommInitRankConfig(&comm, world, id, rank, &config));
  if (rank == 0) remove(id_path); /* every rank has joined */
  int count = 0, user_rank = -1, device = -2;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &user_rank));
  NCCL_OK(ncclCommCuDevice(comm, &device));
  CHECK(count == world && user_rank == rank && device >= -1, "count %d, rank %d, device %d", count, user_rank, device);
  test_allreduce(comm, world);
  test_allgather(comm, world);
  test_reducescatter(comm, world);
  test_broadcast(comm, world);
  test_reduce(comm, world);
  test_sendrecv(comm, world);
  test_errors(comm, world);
  NCCL_OK(ncclCommDestroy(comm));
  /* A second communicator on the same ranks, for the failure of one of them. */
  NCCL_OK(ncclCommInitRank(&comm, world, share_id(id_path), rank));
  if (rank == 0) remove(id_path);
  test_peer_exit(comm, world);
  printf("rank %d of %d: every check passed\n", rank, world);
  return 0;
}

/* One thread drives every rank: ncclCommInitAll, then collectives and destruction in groups. */
static int run_clique(int world) {
  enum { kMaxRanks = 8 };
  CHECK(world >= 1 && world <= kMaxRanks, "--clique takes 1 to %d ranks", kMaxRanks);
  ncclComm_t comms[kMaxRanks];
  int devices[kMaxRanks] = {0}; /* every rank on device 0 where there is one; ignored without */
  NCCL_OK(ncclCommInitAll(comms, world, devices));
  const size_t count = 10007;
  float* in[kMaxRanks];
  float* sum[kMaxRanks];
  float* gathered[kMaxRanks];
  for (int r = 0; r < world; ++r) {
    in[r] = allocate(count * sizeof(float));
    sum[r] = allocate(count * sizeof(float));
    gathered[r] = allocate(world * count * sizeof(float));
    for (size_t i = 0; i < count; ++i) in[r][i] = (float)((r + 1) * (int)(i % 13 + 1));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    NCCL_OK(ncclAllReduce(in[r], sum[r], count, ncclFloat32, ncclSum, comms[r], NULL));
    NCCL_OK(ncclAllGather(in[r], gathered[r], count, ncclFloat32, comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) {
    rank = r;
    for (size_t i = 0; i < count; ++i) {
      CHECK(sum[r][i] == (float)(world * (world + 1) / 2 * (int)(i % 13 + 1)), "clique allreduce: element %zu", i);
      for (int from = 0; from < world; ++from) {
        CHECK(gathered[r][from * count + i] == in[from][i], "clique allgather: rank %d's element %zu", from, i);
      }
    }
  }
  for (int r = 0; r < world; ++r) free(in[r]), free(sum[r]), free(gathered[r]);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < world; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  NCCL_OK(ncclGroupEnd());
  /* The same by hand: creations in a group happen at its end, and not before. */
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < world; ++r) NCCL_OK(ncclCommInitRank(&comms[r], world, id, r));
  int ranks = 0;
  NCCL_FAILS(ncclCommCount(comms[0], &ranks), ncclInvalidUsage, "created only at the end of the group");
  NCCL_FAILS(ncclCommDestroy(comms[0]), ncclInvalidUsage, "end the group first");
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) {
    int user_rank = -1;
    NCCL_OK(ncclCommCount(comms[r], &ranks));
    NCCL_OK(ncclCommUserRank(comms[r], &user_rank));
    CHECK(ranks == world && user_rank == r, "communicator %d: rank %d of %d", r, user_rank, ranks);
  }
  /* ncclCommFinalize waits for a communicator's operations: not inside a group that holds some
   * of them, which would post them only at its end. */
  float ones[kMaxRanks], totals[kMaxRanks];
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < world; ++r) {
    ones[r] = 1.0f;
    NCCL_OK(ncclAllReduce(&ones[r], &totals[r], 1, ncclFloat32, ncclSum, comms[r], NULL));
  }
  NCCL_FAILS(ncclCommFinalize(comms[0]), ncclInvalidUsage, "operations in the open group");
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < world; ++r) {
    NCCL_OK(ncclCommFinalize(comms[r]));
    CHECK(totals[r] == (float)world, "grouped allreduce on communicator %d: %g", r, totals[r]);
  }
  /* A communicator whose destruction waits for the group's end takes no more calls, and no
   * second destruction: the group's end frees it before it posts the group's operations. The
   * refused call fails the group's end too, as in NCCL, which still destroys every one. */
  float one = 1.0f, result = 0.0f;
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < world; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  NCCL_FAILS(ncclAllReduce(&one, &result, 1, ncclFloat32, ncclSum, comms[0], NULL), ncclInvalidUsage,
             "destroyed at the end of the open group");
  NCCL_FAILS(ncclCommDestroy(comms[0]), ncclInvalidUsage, "already destroyed at the end of the open group");
  NCCL_FAILS(ncclGroupEnd(), ncclInvalidUsage,
             "ncclAllReduce: the communicator is destroyed at the end of the open group");
  printf("clique of %d ranks: every check passed\n", world);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--clique") == 0) return run_clique(atoi(argv[2]));
  if (argc == 2) return run_ranks(argv[1]);
  fprintf(stderr, "usage: %s ID_FILE (under scripts/ucclzip-run) | %s --clique N\n", argv[0], argv[0]);
  return 2;
}
