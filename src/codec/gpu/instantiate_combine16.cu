// Decompress-and-combine kernels and launchers for bf16 and fp16.
#include "codec/gpu/launch.cuh"

namespace ucclzip::codec::gpu {
UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(DataType::kBFloat16)
UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(DataType::kFloat16)
}  // namespace ucclzip::codec::gpu
