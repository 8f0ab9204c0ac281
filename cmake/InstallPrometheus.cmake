# Install rules of the optional dlock::prometheus component (self-contained; included by
# Install.cmake). Its own export set, so `find_package(dlock COMPONENTS prometheus)` loads it
# only when asked (dlockConfig.cmake) and a dlock built without it still installs cleanly.
if(TARGET dlock_prometheus)
  install(TARGETS dlock_prometheus EXPORT dlockPrometheusTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT dlockPrometheusTargets NAMESPACE dlock::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
endif()
