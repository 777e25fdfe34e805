# The CUPTI core of libprofd_cupti.so (cupti/core.c and the files around it) against a fake
# libcupti. The fake hands activity buffers to the real libcupti's record iterator, which needs
# no GPU and no driver, so synthetic CUDA 13 records are walked exactly as in production.
if(PROFD_CUPTI_BUILT AND PROFD_CUPTI_REAL_LIBRARY)
  add_library(fake_cupti SHARED fixtures/cupti_fake/fake_cupti.c)
  target_include_directories(fake_cupti PRIVATE ${PROFD_CUPTI_INCLUDE_DIR})
  target_compile_definitions(fake_cupti PRIVATE
    FAKE_CUPTI_REAL_LIBRARY="${PROFD_CUPTI_REAL_LIBRARY}")
  target_compile_options(fake_cupti PRIVATE -fvisibility=hidden)
  target_link_libraries(fake_cupti PRIVATE dl)
  # libcupti_fake.so: named like the library it stands for, so that tools which treat CUPTI's
  # frames as plumbing (profctl report's launch sites) treat the fake's the same way.
  set_target_properties(fake_cupti PROPERTIES OUTPUT_NAME cupti_fake)

  add_executable(test_cupti_core unit/test_cupti_core.c)
  target_include_directories(test_cupti_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit
                             ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake ${CMAKE_SOURCE_DIR}/bpf)
  target_link_libraries(test_cupti_core PRIVATE profd_cupti_static fake_cupti)
  target_compile_definitions(test_cupti_core PRIVATE
    FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>" PROFD_CUPTI_SO="$<TARGET_FILE:profd_cupti>")
  # The test reads the probe note of the real library.
  add_dependencies(test_cupti_core profd_cupti)
  add_test(NAME unit.test_cupti_core COMMAND test_cupti_core)
  set_tests_properties(unit.test_cupti_core PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120)
elseif(PROFD_CUPTI_BUILT)
  message(STATUS "test_cupti_core: not built (no libcupti to walk activity buffers)")
endif()

# The NVTX entry point against the fake libcupti and a fake CUDA driver (libcuda_fake.so, which
# only answers cuDriverGetVersion).
if(TARGET fake_cupti)
  add_library(fake_cuda SHARED fixtures/cuda_fake/fake_cuda.c)
  target_include_directories(fake_cuda PRIVATE ${PROFD_CUPTI_INCLUDE_DIR})
  target_compile_options(fake_cuda PRIVATE -fvisibility=hidden)
  set_target_properties(fake_cuda PROPERTIES OUTPUT_NAME cuda_fake)

  add_executable(test_cupti_nvtx unit/test_cupti_nvtx.c)
  target_include_directories(test_cupti_nvtx PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit
                             ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake
                             ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cuda_fake)
  target_link_libraries(test_cupti_nvtx PRIVATE profd_cupti_static fake_cupti fake_cuda)
  target_compile_definitions(test_cupti_nvtx PRIVATE
    FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>" FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
  add_test(NAME unit.test_cupti_nvtx COMMAND test_cupti_nvtx)
  set_tests_properties(unit.test_cupti_nvtx PROPERTIES LABELS unit TIMEOUT 60)
endif()

# CUPTI behaviours the fake models for the core: another client of the process taking the
# activity API, one session for the life of the process, records without timestamps, buffers
# CUPTI withholds while a record in them is incomplete.
if(PROFD_CUPTI_BUILT AND PROFD_CUPTI_REAL_LIBRARY)
  add_executable(test_cupti_quirks unit/test_cupti_quirks.c)
  target_include_directories(test_cupti_quirks PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit
                             ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake)
  target_link_libraries(test_cupti_quirks PRIVATE profd_cupti_static fake_cupti)
  target_compile_definitions(test_cupti_quirks PRIVATE FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>")
  add_test(NAME unit.test_cupti_quirks COMMAND test_cupti_quirks)
  set_tests_properties(unit.test_cupti_quirks PROPERTIES LABELS unit TIMEOUT 120)
endif()
