# Installs the library so that other projects can `find_package(ucclzip)` and link
# ucclzip::ucclzip, or ask `pkg-config ucclzip` for the flags.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ucclzip EXPORT ucclzipTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ucclzip DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(UCCLZIP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ucclzip)
install(EXPORT ucclzipTargets NAMESPACE ucclzip:: DESTINATION ${UCCLZIP_CMAKE_DIR})
configure_package_config_file(cmake/ucclzipConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ucclzipConfig.cmake INSTALL_DESTINATION ${UCCLZIP_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ucclzipConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ucclzipConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ucclzipConfigVersion.cmake
              cmake/Finducx.cmake
        DESTINATION ${UCCLZIP_CMAKE_DIR})

# pkg-config: the module names follow from the library's own link lists, so that they cannot
# drift apart. Public dependencies (the public headers use them) go to Requires; private ones
# only a static archive needs (Requires.private). The CUDA toolkit has no pkg-config module of a
# stable name, so its paths are written in as found.
function(ucclzip_pkg_config_modules out)
  set(modules)
  foreach(dependency IN LISTS ARGN)
    if(dependency MATCHES "^absl::(.+)$")
      list(APPEND modules absl_${CMAKE_MATCH_1})
    elseif(dependency STREQUAL "ucx::ucp")
      list(APPEND modules ucx)
    elseif(NOT dependency STREQUAL "CUDA::cudart")
      message(FATAL_ERROR "cmake/Install.cmake: no pkg-config module known for ucclzip's dependency ${dependency}")
    endif()
  endforeach()
  list(JOIN modules " " joined)
  set(${out} ${joined} PARENT_SCOPE)
endfunction()
get_target_property(public_dependencies ucclzip INTERFACE_LINK_LIBRARIES)
list(FILTER public_dependencies EXCLUDE REGEX "^\\$<LINK_ONLY:")  # a static archive's private ones
get_target_property(all_dependencies ucclzip LINK_LIBRARIES)
set(private_dependencies ${all_dependencies})
list(REMOVE_ITEM private_dependencies ${public_dependencies})
ucclzip_pkg_config_modules(UCCLZIP_PC_REQUIRES ${public_dependencies})
ucclzip_pkg_config_modules(UCCLZIP_PC_REQUIRES_PRIVATE ${private_dependencies})
list(JOIN CUDAToolkit_INCLUDE_DIRS " -I" cuda_includes)
set(UCCLZIP_PC_CUDA_CFLAGS "-I${cuda_includes}")
set(UCCLZIP_PC_CUDA_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart")
set(UCCLZIP_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The way up from the .pc file's folder to the prefix ("../.." for lib/pkgconfig).
file(RELATIVE_PATH UCCLZIP_PC_UP /prefix/${UCCLZIP_PC_DIR} /prefix)
string(REGEX REPLACE "/$" "" UCCLZIP_PC_UP "${UCCLZIP_PC_UP}")
configure_file(cmake/ucclzip.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ucclzip.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ucclzip.pc DESTINATION ${UCCLZIP_PC_DIR})
