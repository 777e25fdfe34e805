# profctl: unit tests of the client. The client's sources (all but main.c) are built into a
# library here so tests can call the parsers, renderers and connection code directly.
find_package(Threads REQUIRED)
add_library(profctl_testlib STATIC
  ${CMAKE_SOURCE_DIR}/client/conn.c ${CMAKE_SOURCE_DIR}/client/cmd_status.c
  ${CMAKE_SOURCE_DIR}/client/cmd_dump.c ${CMAKE_SOURCE_DIR}/client/profile.c
  ${CMAKE_SOURCE_DIR}/client/format_folded.c ${CMAKE_SOURCE_DIR}/client/format_svg.c)
target_include_directories(profctl_testlib PUBLIC ${CMAKE_SOURCE_DIR}/client)
target_link_libraries(profctl_testlib PUBLIC profd_common)

foreach(name test_format test_format_cli)
  add_executable(${name} unit/${name}.c)
  target_link_libraries(${name} PRIVATE profctl_testlib Threads::Threads)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  add_test(NAME unit.${name} COMMAND ${name})
  set_tests_properties(unit.${name} PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()

# The real binary: one line and the documented exit code for each kind of failure.
# profctl_exit(NAME EXPECTED_CODE STDERR_REGEX ARGS...)
function(profctl_exit name code regex)
  add_test(NAME unit.profctl_${name}
    COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1 >/dev/null); rc=$?; echo \"$out\"; \
[ \"$rc\" = ${code} ] || { echo \"exit $rc, expected ${code}\"; exit 1; }; \
[ \"$(printf '%s\\n' \"$out\" | wc -l)\" = 1 ] || { echo 'expected one line'; exit 1; }"
      $<TARGET_FILE:profctl> ${ARGN})
  set_tests_properties(unit.profctl_${name} PROPERTIES LABELS unit TIMEOUT 30
    PASS_REGULAR_EXPRESSION "${regex}" FAIL_REGULAR_EXPRESSION "exit [0-9]+, expected|one line")
endfunction()
profctl_exit(no_daemon 3
  "^profctl: no daemon at /nonexistent/x: start it with `sudo profd` or pass --socket\n$"
  --socket /nonexistent/x status)
profctl_exit(no_daemon_env 3 "no daemon at /nonexistent/y" status)
set_tests_properties(unit.profctl_no_daemon_env PROPERTIES ENVIRONMENT PROFD_SOCKET=/nonexistent/y)
profctl_exit(bad_pid 2 "--pid 'abc' is not a positive integer; see 'profctl dump --help'"
  dump flamegraph --pid abc)
profctl_exit(zero_pid 2 "--pid '0' is out of range" dump flamegraph --pid 0)
profctl_exit(bad_since 2 "--since '5x' is not a duration" dump flamegraph --since 5x)
profctl_exit(bad_format 2 "--format 'png' is not svg or folded" dump flamegraph --format png)
profctl_exit(unknown_cmd 2 "unknown command 'frobnicate'" frobnicate)
profctl_exit(no_cmd 2 "no command given")
