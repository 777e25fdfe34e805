# Installation, and the Debian package made from it: `cpack -G DEB` (or plain `cpack`) in the
# build tree writes profd_VERSION-1_ARCH.deb (and profd-dbgsym_...ddeb with the debug symbols).
# Layout under the prefix (/usr in the package, /usr/local for `cmake --install`):
#   bin/profd, bin/profctl
#   lib/profd/libprofd_cupti.so            CUDA_INJECTION64_PATH for GPU jobs (docs/fleet.md)
#   share/man/man1/profctl.1.gz, share/man/man8/profd.8.gz
#   share/bash-completion/completions/profctl
#   share/doc/profd/                        README.md, fleet.md, profctl.md, copyright
# and the unit and config of packaging/install-system-files.cmake.

install(TARGETS profd profctl RUNTIME DESTINATION bin)
if(TARGET profd_cupti)
  install(TARGETS profd_cupti LIBRARY DESTINATION lib/profd)
endif()

# Man pages go in compressed, as Debian's tools expect (gzip -n: no name or time stamp, so the
# package is reproducible).
file(GLOB PROFD_MAN_PAGES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.[1-8])
set(PROFD_MAN_OUT ${CMAKE_BINARY_DIR}/man)
file(MAKE_DIRECTORY ${PROFD_MAN_OUT})
set(PROFD_MAN_GZ "")
foreach(page ${PROFD_MAN_PAGES})
  get_filename_component(name ${page} NAME)
  string(REGEX REPLACE ".*\\.([1-8])$" "\\1" section ${name})
  add_custom_command(
    OUTPUT ${PROFD_MAN_OUT}/${name}.gz
    COMMAND gzip -9nc ${page} > ${PROFD_MAN_OUT}/${name}.gz.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${PROFD_MAN_OUT}/${name}.gz.tmp ${PROFD_MAN_OUT}/${name}.gz
    DEPENDS ${page}
    COMMENT "gzip ${name}")
  list(APPEND PROFD_MAN_GZ ${PROFD_MAN_OUT}/${name}.gz)
  install(FILES ${PROFD_MAN_OUT}/${name}.gz DESTINATION share/man/man${section})
endforeach()
add_custom_target(man_pages ALL DEPENDS ${PROFD_MAN_GZ})

install(FILES scripts/profctl-completion.bash DESTINATION share/bash-completion/completions
        RENAME profctl)
install(FILES README.md docs/fleet.md docs/profctl.md packaging/copyright
        DESTINATION share/doc/profd)
install(CODE "set(PROFD_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
set(PROFD_BINARY_DIR \"${CMAKE_BINARY_DIR}\")")
install(SCRIPT packaging/install-system-files.cmake)

# --- the Debian package ------------------------------------------------------------------------
set(PROFD_DEB_MAINTAINER "profd maintainers <profd@localhost>"
    CACHE STRING "The Maintainer field of the Debian package")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME profd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${PROFD_DEB_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "sampling profiler daemon for CPU, Python and CUDA stacks, with fleet export")
# The summary is the Description's first line; this is the text below it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "profd samples the call stacks of every process on the machine with eBPF (kernel,
native and Python frames in one stack), keeps them in memory and serves profiles
to profctl: flame graphs, pprof, speedscope, top views and differential graphs.
A CUPTI injection library adds GPU kernel time to the stack that launched it.
.
As a node agent it runs system-wide as a systemd service and exports its
profiles to Grafana Pyroscope and OpenTelemetry collectors through a spool on
disk that survives backend outages and restarts. Installing the package enables
and starts the service; /etc/profd/profd.conf sets the backends.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Library dependencies from the binaries (dpkg-shlibdeps: libcapstone4 for the unwind rows from
# machine code, libelf1, libbpf1, ...; building needs libcapstone-dev, scripts/install-deps);
# then what they do not show: kill(1)
# for `systemctl reload profd`, and the CA bundle for HTTPS export with the system's CAs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "procps")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles ${CMAKE_SOURCE_DIR}/packaging/debian/postinst
    ${CMAKE_SOURCE_DIR}/packaging/debian/prerm ${CMAKE_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Stripped binaries in the package (by CPack, with objcopy --strip-unneeded, which keeps the
# library's USDT notes), their debug symbols by build id in profd-dbgsym.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
include(CPack)
