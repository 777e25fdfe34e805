# The export module (daemon/export/): the spool + HTTP sender against a scripted HTTP server on
# 127.0.0.1 (a thread of the test), a full disk on a tiny tmpfs in a mount namespace of its own.
profd_unit(test_sender)
target_link_libraries(test_sender PRIVATE profd_export_sender)
# The spool as a trust boundary: unsafe folders, damaged files, quarantine's caps.
profd_unit(test_spool)
target_link_libraries(test_spool PRIVATE profd_export_sender PkgConfig::ZLIB)
