# libprofd_cupti: the uplink against a fake daemon, the whole library through dlopen, and
# programs that must behave the same with the library injected. Only when the library is built
# (CUPTI headers and sys/sdt.h present); none of these needs a GPU.
if(PROFD_CUPTI_BUILT)
  add_executable(test_cupti_uplink unit/test_cupti_uplink.c)
  target_link_libraries(test_cupti_uplink PRIVATE profd_cupti_static)
  target_include_directories(test_cupti_uplink PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  add_test(NAME unit.test_cupti_uplink COMMAND test_cupti_uplink)
  set_tests_properties(unit.test_cupti_uplink PROPERTIES LABELS unit SKIP_RETURN_CODE 77
    TIMEOUT 60)

  add_executable(test_cupti_gate unit/test_cupti_gate.c)
  target_link_libraries(test_cupti_gate PRIVATE profd_cupti_static)
  target_include_directories(test_cupti_gate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  add_test(NAME unit.test_cupti_gate COMMAND test_cupti_gate)
  set_tests_properties(unit.test_cupti_gate PROPERTIES LABELS unit TIMEOUT 30)

  add_executable(cupti_noop fixtures/cupti_noop/noop.c)
  target_link_libraries(cupti_noop PRIVATE dl)
  add_test(NAME unit.cupti_noop_inject
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_noop/check.sh $<TARGET_FILE:cupti_noop>
            $<TARGET_FILE:profd_cupti> inject)
  set_tests_properties(unit.cupti_noop_inject PROPERTIES LABELS unit TIMEOUT 60)

  # The same program making a real CUDA runtime call, CUDA loading the library itself (on a
  # machine without a GPU the call fails and CUDA may never get as far as the library).
  find_package(CUDAToolkit QUIET)
  if(TARGET CUDA::cudart)
    add_executable(cupti_noop_cudart fixtures/cupti_noop/noop.c)
    target_compile_definitions(cupti_noop_cudart PRIVATE NOOP_CUDART=1)
    target_link_libraries(cupti_noop_cudart PRIVATE CUDA::cudart dl)
    add_test(NAME unit.cupti_noop_cudart
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_noop/check.sh
              $<TARGET_FILE:cupti_noop_cudart> $<TARGET_FILE:profd_cupti> env)
    set_tests_properties(unit.cupti_noop_cudart PROPERTIES LABELS unit TIMEOUT 60)
  endif()

  # The whole library with the fake libcupti of cupti_core.cmake (target fake_cupti, defined
  # after this file; it needs the real libcupti for its record iterator).
  if(PROFD_CUPTI_REAL_LIBRARY AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake/fake_cupti.c)
    add_executable(test_cupti_lib unit/test_cupti_lib.c)
    target_link_libraries(test_cupti_lib PRIVATE profd_common fake_cupti dl)
    target_include_directories(test_cupti_lib PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit
                               ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake
                               ${PROFD_CUPTI_INCLUDE_DIR})
    target_compile_definitions(test_cupti_lib PRIVATE
      CUPTI_LIB="$<TARGET_FILE:profd_cupti>" CUPTI_FAKE="$<TARGET_FILE:fake_cupti>")
    add_dependencies(test_cupti_lib profd_cupti)
    add_test(NAME unit.test_cupti_lib COMMAND test_cupti_lib)
    set_tests_properties(unit.test_cupti_lib PROPERTIES LABELS unit SKIP_RETURN_CODE 77
      TIMEOUT 60)
  endif()
endif()
