#include "pipeline/reduce.h"
#include "pipeline/reduce_math.h"
#include "ucclzip/reduction.h"

namespace ucclzip::pipeline {

void ReduceHost(const Combiner& combiner, const void* received, const void* local, void* out, uint64_t count) {
  const size_t width = ElementSize(combiner.dtype);
  const auto* a = static_cast<const uint8_t*>(received);
  const auto* b = static_cast<const uint8_t*>(local);
  auto* o = static_cast<uint8_t*>(out);
  for (uint64_t i = 0; i < count; ++i) {
    reduce::ReduceElement(combiner.dtype, combiner.op, combiner.divisor, a + i * width, b + i * width, o + i * width);
  }
}

}  // namespace ucclzip::pipeline

namespace ucclzip {

void ReduceOnHost(DataType dtype, ReduceOp op, const void* received, const void* local, void* out, uint64_t count,
                  uint32_t divisor) {
  pipeline::ReduceHost({dtype, op, divisor}, received, local, out, count);
}

}  // namespace ucclzip
