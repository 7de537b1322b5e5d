// Kernels and launchers for the types that split with Split32.
#include "codec/gpu/launch.cuh"

namespace ucclzip::codec::gpu {
UCCLZIP_INSTANTIATE_CODEC_LAUNCHERS(Split32)
}  // namespace ucclzip::codec::gpu
