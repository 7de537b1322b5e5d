# Finds UCX through pkg-config and exposes it as ucx::ucp.
#
# Debian's own ucx-targets.cmake hard-codes /usr paths, so it breaks when the .debs are unpacked
# into a prefix (as on the GPU machine, which has no network). pkg-config honours
# PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR, which works both for a system install and for
# such a prefix. A CUDA-enabled UCX (e.g. the libucx-cu13 wheel) is found the same way once its
# ucx.pc is on PKG_CONFIG_PATH.
find_package(PkgConfig REQUIRED)
pkg_check_modules(UCX_PC QUIET IMPORTED_TARGET ucx)
if(UCX_PC_FOUND AND NOT TARGET ucx::ucp)
  add_library(ucx::ucp INTERFACE IMPORTED)
  target_link_libraries(ucx::ucp INTERFACE PkgConfig::UCX_PC)
endif()
set(ucx_VERSION ${UCX_PC_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ucx REQUIRED_VARS UCX_PC_FOUND VERSION_VAR ucx_VERSION)
