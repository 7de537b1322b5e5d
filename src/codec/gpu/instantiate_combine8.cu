// Decompress-and-combine kernels and launchers for fp8 e4m3 and e5m2.
#include "codec/gpu/launch.cuh"

namespace ucclzip::codec::gpu {
UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(DataType::kFloat8E4M3)
UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(DataType::kFloat8E5M2)
}  // namespace ucclzip::codec::gpu
