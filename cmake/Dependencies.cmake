# Every external dependency is found here, once, as an imported target.
find_package(CUDAToolkit 12.0 REQUIRED)
find_package(absl REQUIRED)
find_package(ucx REQUIRED)  # cmake/Finducx.cmake: pkg-config based, works from a relocated prefix
if(UCCLZIP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(UCCLZIP_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
