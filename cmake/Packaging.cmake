# `cpack -G DEB` in a build directory: one package `dlock` with the library, its headers, the
# CMake package, dlock.pc, the CLI, its man page and bash completion (the install rules of
# cmake/Install.cmake and tools/). Depends: what dpkg-shlibdeps finds for the CLI (libc6,
# libstdc++6, libgcc-s1, libssl3) plus the headers a consumer of the library compiles against.
set(DLOCK_PACKAGE_MAINTAINER "dlock maintainers <dlock@localhost>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR dlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${DLOCK_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Distributed locks on Redis for C++20, and the dlock command")
set(CPACK_PACKAGE_DESCRIPTION
    "A Redisson-compatible reentrant lock with a watchdog, pub/sub wake-up and fencing tokens, a
simple SET NX PX lock, fair and read-write locks, multi-locks and Redlock, lease handles whose
loss cannot be missed, and a `dlock` command that holds a lock while another command runs.
This package holds the static library, its headers, CMake and pkg-config files, the dlock
command, its man page and bash completion.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # dlock_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DLOCK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_STRIP_FILES ON) # debug sections out of the CLI and the archive (cmake/Install.cmake)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Merged with the shlibdeps result. Asio is header-only (used by the public headers), OpenSSL's
# headers are needed by Asio's and its libraries are linked by the consumer.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libasio-dev, libssl-dev")
# A consumer of the static library links the backends' client libraries too (dlock.pc,
# -lzookeeper_st, gRPC): their -dev packages hold the link-time files. libpq is loaded at run
# time by the first postgresql:// URL (src/postgres/libpq.hpp), which shlibdeps cannot see.
if(DLOCK_HAS_POSTGRES)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libpq5")
endif()
if(DLOCK_HAS_ZOOKEEPER)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libzookeeper-st-dev")
endif()
if(DLOCK_HAS_ETCD)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libgrpc++-dev, libprotobuf-dev")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "redis-server, pkg-config")
include(CPack)
