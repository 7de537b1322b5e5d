# Every external dependency is found here, once, as an imported target.
find_package(CUDAToolkit 12.0 REQUIRED)
find_package(absl REQUIRED)
find_package(ucx REQUIRED)  # cmake/Finducx.cmake: pkg-config based, works from a relocated prefix
if(UCCLZIP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(UCCLZIP_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
  # Optional: nvCOMP 6, which `ucclzip-bench codec --vs nvcomp` measures beside ucclzip. The
  # nvidia-libnvcomp-cu13 wheel ships its CMake package: point nvcomp_DIR at
  # <wheel>/nvidia/libnvcomp/lib64/cmake/nvcomp or CMAKE_PREFIX_PATH at <wheel>/nvidia/libnvcomp.
  find_package(nvcomp 6 CONFIG QUIET COMPONENTS nvcomp PATH_SUFFIXES lib64/cmake/nvcomp)
  message(STATUS "nvCOMP for the codec benchmark: ${nvcomp_FOUND} ${nvcomp_VERSION}")
endif()
