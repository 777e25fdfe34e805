# End-to-end tests: root, the real kernel, the real daemon on a real socket.
find_package(Python3 COMPONENTS Interpreter REQUIRED)

# Fixtures with known call chains: frame pointers kept, no inlining, no tail calls.
set(FIXTURE_FLAGS -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
    -fno-optimize-sibling-calls -fno-inline)
foreach(fx burn syscaller demo jit blocker offcpu cuda_sync)
  add_executable(fixture_${fx} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/${fx}.c)
  # Fixtures are the profiled programs, not code under test: no sanitizer runtime in them.
  target_compile_options(fixture_${fx} PRIVATE ${FIXTURE_FLAGS} -fno-sanitize=all)
  target_link_options(fixture_${fx} PRIVATE -fno-sanitize=all)
  set_target_properties(fixture_${fx} PROPERTIES OUTPUT_NAME ${fx}
                        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fixtures)
endforeach()
target_link_libraries(fixture_demo PRIVATE pthread)
target_link_libraries(fixture_blocker PRIVATE pthread)
target_link_libraries(fixture_offcpu PRIVATE pthread)

# Fixtures of the CFI unwinder (test_unwind.py, bench/unwind.sh): built by gcc AND by clang, at
# -O2 without frame pointers, so only the CFI links their frames. Built by custom commands, not as
# targets: the project's flags (-fno-omit-frame-pointer, the sanitizers) must not reach them.
# Each is tests/fixtures/unwind_NAME_CC. unwind_stripped_CC is unwind_chain built without unwind
# tables (its functions' CFI only in .debug_frame), stripped, its debug file in .debug/ beside it,
# named by .gnu_debuglink: the walk needs the CFI of a separate debug file.
find_program(FIXTURE_GCC gcc)
find_program(OBJCOPY objcopy REQUIRED)
set(UNWIND_FIXTURE_FLAGS -O2 -g -fomit-frame-pointer -Wall -Wextra)
set(UNWIND_FIXTURE_DIR ${CMAKE_BINARY_DIR}/tests/fixtures)
set(UNWIND_FIXTURE_SRC ${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
set(unwind_fixtures)
set(unwind_compilers clang ${CLANG})
if(FIXTURE_GCC)
  list(APPEND unwind_compilers gcc ${FIXTURE_GCC})
else()
  message(WARNING "no gcc: the unwinding fixtures are built by clang only")
endif()
while(unwind_compilers)
  list(POP_FRONT unwind_compilers cc_name cc_path)
  foreach(fx chain drap signal recurse spawn jit jitfp)
    set(out ${UNWIND_FIXTURE_DIR}/unwind_${fx}_${cc_name})
    add_custom_command(OUTPUT ${out}
      COMMAND ${cc_path} ${UNWIND_FIXTURE_FLAGS} -o ${out} ${UNWIND_FIXTURE_SRC}/unwind_${fx}.c
              -lpthread
      DEPENDS ${UNWIND_FIXTURE_SRC}/unwind_${fx}.c ${UNWIND_FIXTURE_SRC}/unwind_chain.h
              ${UNWIND_FIXTURE_SRC}/unwind_jit.h
      COMMENT "Building unwind_${fx}_${cc_name} (${cc_name}, no frame pointers)" VERBATIM)
    list(APPEND unwind_fixtures ${out})
  endforeach()
  # unwind_dlopen loads unwind_dlib_CC.so while it runs (and copies of it, test_unwind_tables.py).
  set(out ${UNWIND_FIXTURE_DIR}/unwind_dlopen_${cc_name})
  add_custom_command(OUTPUT ${out}
    COMMAND ${cc_path} ${UNWIND_FIXTURE_FLAGS} -o ${out} ${UNWIND_FIXTURE_SRC}/unwind_dlopen.c
            -l${CMAKE_DL_LIBS}
    DEPENDS ${UNWIND_FIXTURE_SRC}/unwind_dlopen.c ${UNWIND_FIXTURE_SRC}/unwind_chain.h
    COMMENT "Building unwind_dlopen_${cc_name} (${cc_name}, no frame pointers)" VERBATIM)
  list(APPEND unwind_fixtures ${out})
  set(out ${UNWIND_FIXTURE_DIR}/unwind_dlib_${cc_name}.so)
  add_custom_command(OUTPUT ${out}
    COMMAND ${cc_path} ${UNWIND_FIXTURE_FLAGS} -shared -fPIC -Wl,--build-id -o ${out}
            ${UNWIND_FIXTURE_SRC}/unwind_dlib.c
    DEPENDS ${UNWIND_FIXTURE_SRC}/unwind_dlib.c
    COMMENT "Building unwind_dlib_${cc_name}.so (${cc_name}, no frame pointers)" VERBATIM)
  list(APPEND unwind_fixtures ${out})
  set(out ${UNWIND_FIXTURE_DIR}/unwind_stripped_${cc_name})
  set(dbg ${UNWIND_FIXTURE_DIR}/.debug/unwind_stripped_${cc_name}.debug)
  add_custom_command(OUTPUT ${out} ${dbg}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${UNWIND_FIXTURE_DIR}/.debug
    COMMAND ${cc_path} ${UNWIND_FIXTURE_FLAGS} -fno-asynchronous-unwind-tables -fno-unwind-tables
            -o ${out}.full ${UNWIND_FIXTURE_SRC}/unwind_chain.c
    COMMAND ${OBJCOPY} --only-keep-debug ${out}.full ${dbg}
    COMMAND ${OBJCOPY} --strip-all ${out}.full ${out}
    COMMAND ${OBJCOPY} --add-gnu-debuglink=${dbg} ${out}
    COMMAND ${CMAKE_COMMAND} -E remove ${out}.full
    DEPENDS ${UNWIND_FIXTURE_SRC}/unwind_chain.c ${UNWIND_FIXTURE_SRC}/unwind_chain.h
    COMMENT "Building unwind_stripped_${cc_name} (${cc_name}, CFI in a separate debug file)"
    VERBATIM)
  list(APPEND unwind_fixtures ${out})
endwhile()
# The chain linked by lld: its read-only segment ends in the page where its executable one
# starts, at an address one page further (unwind_chain_lld, test_unwind.py lld).
find_program(FIXTURE_LLD ld.lld)
if(FIXTURE_LLD)
  set(out ${UNWIND_FIXTURE_DIR}/unwind_chain_lld)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CLANG} ${UNWIND_FIXTURE_FLAGS} -fuse-ld=lld -o ${out} ${UNWIND_FIXTURE_SRC}/unwind_chain.c
    DEPENDS ${UNWIND_FIXTURE_SRC}/unwind_chain.c ${UNWIND_FIXTURE_SRC}/unwind_chain.h
    COMMENT "Building unwind_chain_lld (clang, lld, no frame pointers)" VERBATIM)
  list(APPEND unwind_fixtures ${out})
else()
  message(WARNING "no ld.lld: unwind_chain_lld is not built (test_unwind.py lld fails)")
endif()
# Mapping changes (test_maps_change.py): maps_many maps its own code many times over; maps_swap
# loads liba, unloads it and loads libb where it was. Built like the fixtures above (CFI only).
set(out ${UNWIND_FIXTURE_DIR}/maps_many)
add_custom_command(OUTPUT ${out}
  COMMAND ${CLANG} ${UNWIND_FIXTURE_FLAGS} -o ${out} ${UNWIND_FIXTURE_SRC}/maps_many.c
  DEPENDS ${UNWIND_FIXTURE_SRC}/maps_many.c
  COMMENT "Building maps_many" VERBATIM)
list(APPEND unwind_fixtures ${out})
set(out ${UNWIND_FIXTURE_DIR}/maps_swap)
add_custom_command(OUTPUT ${out}
  COMMAND ${CLANG} ${UNWIND_FIXTURE_FLAGS} -o ${out} ${UNWIND_FIXTURE_SRC}/maps_swap.c
          -l${CMAKE_DL_LIBS}
  DEPENDS ${UNWIND_FIXTURE_SRC}/maps_swap.c
  COMMENT "Building maps_swap" VERBATIM)
list(APPEND unwind_fixtures ${out})
foreach(lib a:liba_first_library_fn b:libb_second_library_fn)
  string(REPLACE ":" ";" lib ${lib})
  list(GET lib 0 name)
  list(GET lib 1 fn)
  set(out ${UNWIND_FIXTURE_DIR}/maps_swap_lib${name}.so)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CLANG} ${UNWIND_FIXTURE_FLAGS} -shared -fPIC -Wl,--build-id -DLIB_FN=${fn} -o ${out}
            ${UNWIND_FIXTURE_SRC}/maps_swap_lib.c
    DEPENDS ${UNWIND_FIXTURE_SRC}/maps_swap_lib.c
    COMMENT "Building maps_swap_lib${name}.so" VERBATIM)
  list(APPEND unwind_fixtures ${out})
endforeach()
add_custom_target(unwind_fixtures ALL DEPENDS ${unwind_fixtures})

# Memory and latency bounds mean little under the sanitizers (ASan's quarantine holds freed
# memory; everything runs several times slower): tests check them on the plain build only.
if(PROFD_SANITIZE)
  set(E2E_SANITIZED 1)
else()
  set(E2E_SANITIZED 0)
endif()
foreach(t cpu_split kernel_frames system_wide exited bad_input cli_errors lifecycle systemd_unit package top
          python python_exit svg_browser diff formats socket_safety setuid perf_map_budget flood
          log_flood losses perf_maps children record views stacks pyspy gil gil_wait offcpu offcpu_python cuda_sync
          py_imports
          export export_faults export_outage export_netns export_labels export_tls export_spool
          reload_storm unwind memory_owners uid_fair)
  add_test(NAME e2e.${t}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_${t}.py)
  set_tests_properties(e2e.${t} PROPERTIES
    LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
endforeach()
# The configuration file at start-up and on SIGHUP, with export to the stand-in receiver.
add_test(NAME e2e.export_config
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_export_config.py)
set_tests_properties(e2e.export_config PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
# A pid reused by another user's process: names, owners and access kept per process. Access
# control on processes that vanish: sanitized too (asan, below).
add_test(NAME e2e.pid_reuse
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_pid_reuse.py)
set_tests_properties(e2e.pid_reuse PROPERTIES
  LABELS "e2e;asan" SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
# Nine interpreters, each profiled twice, and the first run fetches CPython 3.14.
set_tests_properties(e2e.python PROPERTIES TIMEOUT 900)
# Nineteen processes profiled for 7 s each, a daemon each.
set_tests_properties(e2e.unwind PROPERTIES TIMEOUT 600)
# Mapping changes: a process over --unwind-max-mappings is described once, not every second,
# and whole once the bound is raised; a library loaded where another was is named as itself.
add_test(NAME e2e.maps_change
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_maps_change.py)
set_tests_properties(e2e.maps_change PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
# The unwind tables: a cache across processes, eviction, a dlopen, 300 libraries, libz's frames.
add_test(NAME e2e.unwind_tables
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_unwind_tables.py)
set_tests_properties(e2e.unwind_tables PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
# The sanitizer pass of scripts/test (build-asan, several times slower) runs every unit test
# but only the e2e tests labelled asan. A test gets the label when it drives the daemon, the
# library or the client through input or events the plain pass cannot judge as well as ASan and
# UBSan can: bad or hostile input (requests, files, perf maps, processes that vanish, stacks read
# from other processes on demand), floods, access control and socket safety, export faults, lost
# samples, start-up refusals and shutdown, table eviction, and the GPU paths (libprofd_cupti.so
# runs sanitized inside the fixture). It
# does not when the plain pass runs the same code on ordinary input and its checks are about
# results (CPU shares, formats, views, Python version sweeps that unit.test_python already runs
# under the sanitizers, timing): those pay the slowdown for nothing. A new e2e test says which.
foreach(t bad_input cli_errors lifecycle socket_safety setuid flood log_flood losses perf_maps
          perf_map_budget exited python_exit stacks export_config export_faults export_spool
          reload_storm unwind_tables maps_change uid_fair)
  set_property(TEST e2e.${t} APPEND PROPERTY LABELS asan)
endforeach()
# numpy's wheel from PyPI (its venv made by scripts/torch-venv --numpy-only on first use):
# whole stacks through OpenBLAS's kernels, which have no CFI.
add_test(NAME e2e.numpy_stacks
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_numpy_stacks.py)
set_tests_properties(e2e.numpy_stacks PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_SANITIZED=${E2E_SANITIZED}")
# The analysis of bench/torch_stacks.py (whole stacks, autograd and ATen frames) on handcrafted
# stacks of each tool's output.
add_test(NAME unit.torch_stacks_checks
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/torch_stacks.py --self-check)
set_tests_properties(unit.torch_stacks_checks PROPERTIES LABELS unit TIMEOUT 60)
# The stack checks of test_unwind.py on handcrafted stacks: no root, no daemon.
add_test(NAME unit.unwind_checks
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_unwind.py --self-check)
set_tests_properties(unit.unwind_checks PROPERTIES LABELS unit TIMEOUT 60
  ENVIRONMENT "PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e")
# Three profiles and a dump per interpreter, up to ten interpreters.
set_tests_properties(e2e.gil PROPERTIES TIMEOUT 600)
# The fleet export against the stand-in receiver (tests/receiver; its venv is made on first use):
# a real two-minute outage of the receiver, then profd killed and restarted on its spool.
set_tests_properties(e2e.export_outage PROPERTIES TIMEOUT 600)

# Launch probes (GPU launch stacks): the sampler's USDT and libcuda uprobe programs, driven
# through the sampler API against a fixture with its own profd:cuda_launch probe site.
add_executable(fixture_usdt_caller ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/launch/usdt_caller.c)
target_compile_options(fixture_usdt_caller PRIVATE ${FIXTURE_FLAGS} -fno-sanitize=all)
target_link_options(fixture_usdt_caller PRIVATE -fno-sanitize=all)
target_link_libraries(fixture_usdt_caller PRIVATE pthread ${CMAKE_DL_LIBS})
set_target_properties(fixture_usdt_caller PROPERTIES OUTPUT_NAME usdt_caller
                      RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fixtures)

# A library with more profd:cuda_launch probe sites than the daemon attaches to.
add_library(fixture_many_notes SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/launch/many_notes.c)
target_compile_options(fixture_many_notes PRIVATE ${FIXTURE_FLAGS} -fno-sanitize=all)
target_link_options(fixture_many_notes PRIVATE -fno-sanitize=all)
set_target_properties(fixture_many_notes PROPERTIES OUTPUT_NAME many_notes
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fixtures)

# A C program, but an e2e test: it loads BPF and attaches uprobes (root, the real kernel).
add_executable(test_launch_bpf e2e/test_launch_bpf.c ${CMAKE_SOURCE_DIR}/daemon/sampler.c)
add_dependencies(test_launch_bpf sample_skel)
target_include_directories(test_launch_bpf PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit ${BPF_OUT})
target_link_libraries(test_launch_bpf PRIVATE profd_core PkgConfig::LIBBPF ${CMAKE_DL_LIBS})
add_dependencies(test_launch_bpf fixture_many_notes fixture_usdt_caller)
foreach(mode usdt uprobe)
  add_test(NAME e2e.launch_${mode}
           COMMAND test_launch_bpf ${mode} $<TARGET_FILE:fixture_usdt_caller>)
  set_tests_properties(e2e.launch_${mode} PROPERTIES
    LABELS "e2e;asan" SKIP_RETURN_CODE 77 TIMEOUT 120 RUN_SERIAL TRUE
    ENVIRONMENT "PROFD_MANY_NOTES=$<TARGET_FILE:fixture_many_notes>")
endforeach()

# How the daemon finds the library it attaches to, without root: a made-up /proc whose
# map_files point at FIFOs, devices, big files; the probe notes counted in real ELF files.
profd_unit(test_launch_file ${CMAKE_SOURCE_DIR}/daemon/sampler.c)
add_dependencies(test_launch_file sample_skel fixture_many_notes fixture_usdt_caller)
target_include_directories(test_launch_file PRIVATE ${BPF_OUT})
target_link_libraries(test_launch_file PRIVATE PkgConfig::LIBBPF)
set_tests_properties(unit.test_launch_file PROPERTIES ENVIRONMENT
  "PROFD_MANY_NOTES=$<TARGET_FILE:fixture_many_notes>;PROFD_USDT_CALLER=$<TARGET_FILE:fixture_usdt_caller>")

# profd in a pid namespace of its own: GPU correlation off, said once at start.
add_test(NAME e2e.launch_pidns
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_launch_pidns.py)
set_tests_properties(e2e.launch_pidns PROPERTIES
  LABELS "e2e;asan" SKIP_RETURN_CODE 77 TIMEOUT 120 RUN_SERIAL TRUE
  ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e")

# The whole GPU path without a GPU: a program loads libprofd_cupti.so over the fake libcupti
# and plays CUDA's part (launch callbacks, activity records timed against its own work); the
# real daemon attaches the launch probe, joins kernels to launch stacks and serves the views.
if(TARGET fake_cupti AND TARGET profd_cupti)
  add_executable(fixture_gpu_app ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/gpu_app/gpu_app.c)
  # Built like the library it loads (sanitized in a sanitizer build): the library is the code
  # under test here, and an instrumented library needs its runtime in the program.
  target_compile_options(fixture_gpu_app PRIVATE ${FIXTURE_FLAGS})
  target_include_directories(fixture_gpu_app PRIVATE ${PROFD_CUPTI_INCLUDE_DIR}
                             ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/cupti_fake)
  target_link_libraries(fixture_gpu_app PRIVATE fake_cupti ${CMAKE_DL_LIBS})
  set_target_properties(fixture_gpu_app PROPERTIES OUTPUT_NAME gpu_app
                        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fixtures)
  add_dependencies(fixture_gpu_app profd_cupti)
  add_test(NAME e2e.gpu COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_gpu.py)
  set_tests_properties(e2e.gpu PROPERTIES
    LABELS "e2e;asan" SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_CUPTI_SO=$<TARGET_FILE:profd_cupti>;PROFD_FAKE_CUPTI=$<TARGET_FILE:fake_cupti>")
  foreach(t gpu_child gpu_wall gpu_memory export_gpu)
    add_test(NAME e2e.${t}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_${t}.py)
    set_tests_properties(e2e.${t} PROPERTIES
      LABELS "e2e;asan" SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE
      ENVIRONMENT "PROFD_BUILD=${CMAKE_BINARY_DIR};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_CUPTI_SO=$<TARGET_FILE:profd_cupti>;PROFD_FAKE_CUPTI=$<TARGET_FILE:fake_cupti>")
  endforeach()
elseif(DEFINED ENV{CI})
  message(FATAL_ERROR "e2e.gpu needs libprofd_cupti and the fake libcupti (CUDA toolkit headers, sys/sdt.h)")
endif()

# NVTX injected with no CUDA driver on the machine, through PyPI's torch (the venv of
# scripts/torch-venv, made on first use: the timeout leaves room for the download). The
# toolkit's stub libcuda, when FindCUDAToolkit picked it, plays the stub installed as the driver.
# Not in a sanitizer build: its library cannot be loaded into an uninstrumented python (the ASan
# runtime must come first); unit.test_cupti_nvtx runs the same code there.
if(TARGET profd_cupti AND NOT PROFD_SANITIZE)
  set(nvtx_stub "")
  if(CUDA_cuda_driver_LIBRARY MATCHES "/stubs/")
    set(nvtx_stub ${CUDA_cuda_driver_LIBRARY})
  endif()
  add_test(NAME e2e.nvtx_no_driver
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_nvtx_no_driver.py)
  set_tests_properties(e2e.nvtx_no_driver PROPERTIES
    LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 1500
    ENVIRONMENT "PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/e2e;PROFD_CUPTI_SO=$<TARGET_FILE:profd_cupti>;PROFD_CUDA_STUB=${nvtx_stub}")
endif()
