# End-to-end tests: root, the real kernel, the real daemon on a real socket.
find_package(Python3 COMPONENTS Interpreter REQUIRED)

# Fixtures with known call chains: frame pointers kept, no inlining, no tail calls.
set(FIXTURE_FLAGS -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
    -fno-optimize-sibling-calls -fno-inline)
foreach(fx burn syscaller demo)
  add_executable(fixture_${fx} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/${fx}.c)
  # Fixtures are the profiled programs, not code under test: no sanitizer runtime in them.
  target_compile_options(fixture_${fx} PRIVATE ${FIXTURE_FLAGS} -fno-sanitize=all)
  target_link_options(fixture_${fx} PRIVATE -fno-sanitize=all)
  set_target_properties(fixture_${fx} PROPERTIES OUTPUT_NAME ${fx}
                        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fixtures)
endforeach()
target_link_libraries(fixture_demo PRIVATE pthread)

foreach(t cpu_split kernel_frames system_wide exited bad_input cli_errors lifecycle systemd_unit top
          python svg_browser diff formats)
  add_test(NAME e2e.${t}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_${t}.py)
  set_tests_properties(e2e.${t} PROPERTIES
    LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e")
endforeach()
# Nine interpreters, each profiled twice, and the first run fetches CPython 3.14.
set_tests_properties(e2e.python PROPERTIES TIMEOUT 900)
