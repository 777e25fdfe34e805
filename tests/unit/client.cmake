# profctl: unit tests of the client. They link profctl_lib (every client source but main.c,
# built in the top CMakeLists.txt) to call the parsers, renderers and connection code directly.
find_package(Threads REQUIRED)

foreach(name test_format test_format_cli test_functable test_formats_files test_diff
    test_gpu_views test_trace test_report test_reshape test_wall)
  add_executable(${name} unit/${name}.c)
  target_link_libraries(${name} PRIVATE profctl_lib Threads::Threads)
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
profctl_exit(bad_format 2 "--format 'png' is not folded, svg, pprof, speedscope or json"
  dump flamegraph --format png)
profctl_exit(unknown_cmd 2 "unknown command 'frobnicate'" frobnicate)
profctl_exit(no_cmd 2 "no command given")
profctl_exit(diff_one_file 2 "diff: give two profiles to compare" diff a.folded)
profctl_exit(diff_missing 1 "^profctl: diff: /nonexistent/a: No such file or directory\n$"
  diff /nonexistent/a /nonexistent/b)
profctl_exit(diff_window 2 "--before '1m..5m' is empty or reversed"
  diff --before 1m..5m --after 1m)
profctl_exit(top_bad_interval 2
  "^profctl: top: --interval '50ms' is out of range \\(100ms to 1h\\); see 'profctl top --help'\n$"
  top --interval 50ms)
profctl_exit(top_bad_window 2 "top: --window 'x' is not a duration" top --window x)
profctl_exit(top_no_daemon 3 "no daemon at /nonexistent/z" --socket /nonexistent/z top)
profctl_exit(table_bad_sort 2 "table: --sort 'cpu' is not self or total" table --sort cpu)
profctl_exit(table_bad_limit 2 "table: --limit '-1' is not a number from 0 to 1000000"
  table --limit -1)

# The trace test parses its output back with this script (python3's json), when python3 is there.
target_compile_definitions(test_trace PRIVATE
  CHECK_TRACE_PY="${CMAKE_CURRENT_SOURCE_DIR}/unit/check_trace_json.py")

# The GPU options fail on the command line, before any daemon is asked.
profctl_exit(bad_value 2
  "^profctl: dump: --value 'gpu_time' is not cpu, gpu, gpu-kernels, copy, copy-bytes or launches; see 'profctl dump --help'\n$"
  dump flamegraph --value gpu_time)
profctl_exit(idle_with_value 2 "--gpu-idle goes with --value cpu, off-cpu or wall, not copy"
  dump flamegraph --gpu-idle --value copy)
profctl_exit(trace_format 2 "dump: --format is for flame graphs, not traces"
  dump trace --format svg)
profctl_exit(trace_no_daemon 3 "no daemon at /nonexistent/t" --socket /nonexistent/t dump trace)
profctl_exit(report_bad_top 2 "report: --top '-2' is not a number from 0 to 1000"
  report --top -2)
profctl_exit(report_no_daemon 3 "no daemon at /nonexistent/r" --socket /nonexistent/r report)
# The view options: conflicts are usage errors before any daemon is asked.
profctl_exit(table_lines_function 2
  "table: --lines cannot go with --function; see 'profctl table --help'"
  --socket /nonexistent/x table --lines --function)
profctl_exit(top_native_python_only 2
  "top: --native cannot go with --python-only; see 'profctl top --help'"
  --socket /nonexistent/x top --native --python-only)
profctl_exit(trace_per_thread 2 "dump: --per-thread is for flame graphs, not traces"
  --socket /nonexistent/x dump trace --per-thread)
profctl_exit(dump_native 2 "dump: unknown option '--native'"
  --socket /nonexistent/x dump flamegraph --native)
