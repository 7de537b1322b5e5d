// Kernels and launchers for the types that split with Split8.
#include "codec/gpu/launch.cuh"

namespace ucclzip::codec::gpu {
UCCLZIP_INSTANTIATE_CODEC_LAUNCHERS(Split8)
}  // namespace ucclzip::codec::gpu
