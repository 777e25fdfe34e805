# The device kit (tests/gpu/README.md): the CUPTI probe travels in the kit and runs on a GPU
# machine; the fake GPU library and the dry run need the fake libcupti of cupti_core.cmake.
# Built only with CUPTI's headers, like libprofd_cupti itself.
if(PROFD_CUPTI_BUILT)
  add_library(profd_kit_probe SHARED ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cupti_probe.c)
  # cupti/: the lists of traced calls and kinds the probe shares with libprofd_cupti.
  target_include_directories(profd_kit_probe PRIVATE ${PROFD_CUPTI_INCLUDE_DIR}
                             ${CMAKE_CURRENT_SOURCE_DIR}/../cupti)
  # The probe is loaded into arbitrary CUDA processes: no sanitizer runtime, only its entry
  # points exported, nothing beyond libc needed.
  target_compile_options(profd_kit_probe PRIVATE -fvisibility=hidden -fno-sanitize=all)
  target_link_options(profd_kit_probe PRIVATE -fno-sanitize=all -Wl,-z,defs)
  target_link_libraries(profd_kit_probe PRIVATE ${CMAKE_DL_LIBS} pthread)
  set_target_properties(profd_kit_probe PROPERTIES OUTPUT_NAME profd_kit_probe
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)

  # A sanitized kit means nothing (the kit is the release build that travels), and an
  # instrumented libprofd_cupti cannot be loaded into the uninstrumented Python of the dry run.
  if(TARGET fake_cupti AND NOT PROFD_SANITIZE)
    add_library(kit_fake SHARED ${CMAKE_CURRENT_SOURCE_DIR}/gpu/kit_fake.c
                ${CMAKE_CURRENT_SOURCE_DIR}/gpu/fake_libcuda.c)
    target_include_directories(kit_fake PRIVATE ${PROFD_CUPTI_INCLUDE_DIR}
                               ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake)
    target_compile_options(kit_fake PRIVATE -fvisibility=hidden -fno-sanitize=all)
    target_link_options(kit_fake PRIVATE -fno-sanitize=all)
    target_link_libraries(kit_fake PRIVATE fake_cupti ${CMAKE_DL_LIBS})
    set_target_properties(kit_fake PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)

    # The kit packed from this build and run dry (fake CUPTI, fake GPU, the real daemon).
    add_test(NAME e2e.gpu_kit
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_kit.py)
    set_tests_properties(e2e.gpu_kit PROPERTIES
      LABELS "e2e;gpu" SKIP_RETURN_CODE 77 TIMEOUT 240 RUN_SERIAL TRUE
      ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e")
  elseif(DEFINED ENV{CI} AND NOT PROFD_SANITIZE)
    message(FATAL_ERROR "e2e.gpu_kit needs the fake libcupti (a libcupti to walk buffers)")
  endif()
endif()
