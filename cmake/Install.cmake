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

# pkg-config: `pkg-config --cflags --libs dlock` (prefix relative to the .pc file's directory).
set(DLOCK_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH DLOCK_PC_RELATIVE_PREFIX /root/${DLOCK_PC_DIR} /root)
# The static library calls into the backends' client libraries when they are built in (libpq
# excepted: it is loaded at run time by the first postgresql:// URL, src/postgres/libpq.hpp).
set(DLOCK_PC_BACKEND_LIBS "")
if(DLOCK_HAS_ZOOKEEPER)
  string(APPEND DLOCK_PC_BACKEND_LIBS " -lzookeeper_st")
endif()
if(DLOCK_HAS_ETCD)
  foreach(lib IN LISTS DLOCK_GRPC_INSTALL_LIBS)
    string(APPEND DLOCK_PC_BACKEND_LIBS " -l${lib}")
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${DLOCK_PC_DIR})

if(DLOCK_BUILD_TOOLS)
  # Bash completion of the CLI (subcommands, options, --kind values).
  install(FILES ${PROJECT_SOURCE_DIR}/tools/dlock/completion/dlock.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dlock)
  # The man page (docs/dlock.1, written with the CLI), installed gzipped as Debian's policy asks
  # (gzip -9n: no name or time stamp in the header, so the package is reproducible).
  if(EXISTS ${PROJECT_SOURCE_DIR}/docs/dlock.1)
    find_program(DLOCK_GZIP gzip REQUIRED)
    set(DLOCK_MAN_GZ ${PROJECT_BINARY_DIR}/dlock.1.gz)
    add_custom_command(OUTPUT ${DLOCK_MAN_GZ}
      COMMAND sh -c "${DLOCK_GZIP} -9n -c \"$1\" > \"$2\"" sh ${PROJECT_SOURCE_DIR}/docs/dlock.1
              ${DLOCK_MAN_GZ}
      DEPENDS ${PROJECT_SOURCE_DIR}/docs/dlock.1 VERBATIM)
    add_custom_target(dlock_man_page ALL DEPENDS ${DLOCK_MAN_GZ})
    install(FILES ${DLOCK_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endif()

# `cmake --install --strip` (and cpack, CPACK_STRIP_FILES): CMake strips the CLI but never a static
# archive (its symbol table would go); drop only the archive's debug sections (73 MB -> a few).
if(CMAKE_STRIP)
  install(CODE "if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
      \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:dlock>\"
      COMMAND_ERROR_IS_FATAL ANY)
  endif()")
endif()

# The optional dlock::prometheus component (its own export set).
include(${PROJECT_SOURCE_DIR}/cmake/InstallPrometheus.cmake)

include(cmake/Packaging.cmake)
