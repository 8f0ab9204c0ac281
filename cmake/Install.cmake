include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS dlock EXPORT dlockTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
if(DLOCK_BUILD_TOOLS)
  install(TARGETS dlock_cli_main RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
include(${PROJECT_SOURCE_DIR}/cmake/InstallPrometheus.cmake)
