// Decompress-and-combine kernels and launchers for fp32.
#include "codec/gpu/launch.cuh"

namespace ucclzip::codec::gpu {
UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(DataType::kFloat32)
}  // namespace ucclzip::codec::gpu
