# Run by `cmake --install` and by CPack: installs the systemd unit and the default config,
# whose places depend on the prefix chosen at install time, not at configure time. The Debian
# package (prefix /usr) gets /lib/systemd/system and /etc/profd; another prefix P (the default
# /usr/local) gets P/lib/systemd/system, which systemd also reads, and P/etc/profd, so a hand
# installation never overwrites an edited /etc/profd/profd.conf. The unit's ExecStart names
# the profd of that prefix.
# In: PROFD_SOURCE_DIR, PROFD_BINARY_DIR.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_unit_dir /lib/systemd/system)
  set(_conf_dir /etc/profd)
else()
  set(_unit_dir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
  set(_conf_dir ${CMAKE_INSTALL_PREFIX}/etc/profd)
endif()

file(READ ${PROFD_SOURCE_DIR}/systemd/profd.service _unit)
string(FIND "${_unit}" "ExecStart=/usr/bin/profd " _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "systemd/profd.service: no 'ExecStart=/usr/bin/profd ' line to point at ${CMAKE_INSTALL_PREFIX}/bin/profd")
endif()
string(REPLACE "ExecStart=/usr/bin/profd " "ExecStart=${CMAKE_INSTALL_PREFIX}/bin/profd " _unit
       "${_unit}")
set(_staged ${PROFD_BINARY_DIR}/packaging/profd.service)
file(WRITE ${_staged}.tmp "${_unit}")
file(RENAME ${_staged}.tmp ${_staged})

file(INSTALL DESTINATION ${_unit_dir} TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES ${_staged})
file(INSTALL DESTINATION ${_conf_dir} TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES ${PROFD_SOURCE_DIR}/packaging/profd.conf)
