# nccl_driver (nccl_driver.c): NCCL's collectives and a send/recv ring in nccl-tests' conventions,
# a plain C program written against nccl.h alone. Linked to NVIDIA's libnccl.so as nccl_driver
# where the CUDA toolkit's (or the system's) nccl.h and libnccl.so are found, and to ucclzip's
# NCCL API as nccl_driver_ucclzip where that library (target ucclzip_nccl) is built, so that
# benchmarks/gpu/multi-gpu.sh measures both with one source. Without a GPU only their command
# line is tested (check_nccl_driver.sh).
find_path(UCCLZIP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} DOC "Directory of NCCL's nccl.h")
find_library(UCCLZIP_REAL_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
             DOC "NVIDIA's libnccl.so")
enable_language(C)

# NAME: the executable; NCCL: the library it links for nccl.h's functions; LABEL: its name in the output.
function(ucclzip_add_nccl_driver name nccl label)
  add_executable(${name} nccl_driver.c)
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${name} PRIVATE -Wall -Wextra -pedantic -Werror)
  target_compile_definitions(${name} PRIVATE NCCL_DRIVER_LIBRARY="${label}")
  target_include_directories(${name} PRIVATE ${UCCLZIP_NCCL_INCLUDE_DIR})
  target_link_libraries(${name} PRIVATE ${nccl} CUDA::cudart)
  if(UCCLZIP_BUILD_TESTS)
    add_test(NAME ${name}_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_nccl_driver.sh $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_cli PROPERTIES LABELS benchmarks TIMEOUT 120)
  endif()
endfunction()

if(UCCLZIP_NCCL_INCLUDE_DIR AND UCCLZIP_REAL_NCCL_LIBRARY)
  message(STATUS "nccl_driver: ${UCCLZIP_NCCL_INCLUDE_DIR}/nccl.h, ${UCCLZIP_REAL_NCCL_LIBRARY}")
  ucclzip_add_nccl_driver(nccl_driver ${UCCLZIP_REAL_NCCL_LIBRARY} nccl)
else()
  message(STATUS "nccl.h or libnccl.so not found: nccl_driver is not built "
                 "(set UCCLZIP_NCCL_INCLUDE_DIR and UCCLZIP_REAL_NCCL_LIBRARY)")
endif()
if(TARGET ucclzip_nccl)
  ucclzip_add_nccl_driver(nccl_driver_ucclzip ucclzip_nccl ucclzip_nccl)
endif()
