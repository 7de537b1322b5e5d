# Installs the library so that other projects can `find_package(ucclzip)` and link ucclzip::ucclzip.
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
