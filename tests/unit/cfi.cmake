# The unwind table builder (daemon/unwind): fixtures with hand-written CFI and with CFI only in
# .debug_frame (stripped, with a separate debug file), and the check against readelf's
# interpretation of the big system libraries.
set(CFIFIX_DIR ${CMAKE_CURRENT_BINARY_DIR}/cfifix)

add_library(cfifix_asm SHARED fixtures/cfi/cfi_asm.c)
set_target_properties(cfifix_asm PROPERTIES OUTPUT_NAME cfiasm LIBRARY_OUTPUT_DIRECTORY ${CFIFIX_DIR})
target_compile_options(cfifix_asm PRIVATE -O2 -fno-sanitize=all)
target_link_options(cfifix_asm PRIVATE -fno-sanitize=all)

# Kernels in assembly with exact CFI, and a copy without .eh_frame: the rows analysed from the
# copy's code against the CFI rows.
add_library(cfifix_insn SHARED fixtures/cfi/insn_asm.c)
set_target_properties(cfifix_insn PROPERTIES OUTPUT_NAME cfiinsn LIBRARY_OUTPUT_DIRECTORY ${CFIFIX_DIR})
target_compile_options(cfifix_insn PRIVATE -O2 -fno-sanitize=all)
target_link_options(cfifix_insn PRIVATE -fno-sanitize=all)
add_custom_command(
  OUTPUT ${CFIFIX_DIR}/libcfiinsn_nocfi.so
  COMMAND ${CMAKE_OBJCOPY} --remove-section=.eh_frame --remove-section=.eh_frame_hdr
          libcfiinsn.so libcfiinsn_nocfi.so
  DEPENDS cfifix_insn
  WORKING_DIRECTORY ${CFIFIX_DIR}
  COMMENT "unwind fixtures: the kernels without their CFI")
add_custom_target(cfifix_insn_nocfi ALL DEPENDS ${CFIFIX_DIR}/libcfiinsn_nocfi.so)

add_library(cfifix_dbg SHARED fixtures/cfi/dbg.c)
set_target_properties(cfifix_dbg PROPERTIES OUTPUT_NAME cfidbg LIBRARY_OUTPUT_DIRECTORY ${CFIFIX_DIR})
target_compile_options(cfifix_dbg PRIVATE -O2 -g -fno-asynchronous-unwind-tables
                       -fomit-frame-pointer -fno-sanitize=all)
target_link_options(cfifix_dbg PRIVATE -fno-sanitize=all -Wl,--build-id)

add_custom_command(
  OUTPUT ${CFIFIX_DIR}/libcfidbg.debug ${CFIFIX_DIR}/libcfidbg_stripped.so
  COMMAND ${CMAKE_OBJCOPY} --only-keep-debug libcfidbg.so libcfidbg.debug
  COMMAND ${CMAKE_OBJCOPY} --strip-all --add-gnu-debuglink=libcfidbg.debug libcfidbg.so
          libcfidbg_stripped.so
  DEPENDS cfifix_dbg
  WORKING_DIRECTORY ${CFIFIX_DIR}
  COMMENT "unwind fixtures: stripped library and its debug file")
add_custom_target(cfifix_variants ALL
  DEPENDS ${CFIFIX_DIR}/libcfidbg.debug ${CFIFIX_DIR}/libcfidbg_stripped.so)

# GCC's realigned frames (DRAP): the unwinding fixture whose c3 has an AVX local and a VLA, as
# gcc builds it (clang realigns without DRAP; the test then checks the hand-written CFI only).
find_program(CFIFIX_GCC gcc)
if(CFIFIX_GCC)
  add_custom_command(OUTPUT ${CFIFIX_DIR}/cfidrap
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CFIFIX_DIR}
    COMMAND ${CFIFIX_GCC} -O2 -fomit-frame-pointer -o ${CFIFIX_DIR}/cfidrap
            ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/unwind_drap.c
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/unwind_drap.c
            ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/unwind_chain.h
    COMMENT "unwind fixtures: a DRAP frame built by gcc" VERBATIM)
  add_custom_target(cfifix_drap ALL DEPENDS ${CFIFIX_DIR}/cfidrap)
  set(CFIFIX_DRAP ${CFIFIX_DIR}/cfidrap)
else()
  set(CFIFIX_DRAP "")
endif()

profd_unit(test_cfi)
target_link_libraries(test_cfi PRIVATE profd_unwind)
add_dependencies(test_cfi cfifix_asm cfifix_dbg cfifix_variants cfifix_insn cfifix_insn_nocfi)
target_compile_definitions(test_cfi PRIVATE
  CFI_ASM="${CFIFIX_DIR}/libcfiasm.so" CFI_DBG="${CFIFIX_DIR}/libcfidbg.so"
  CFI_DBG_STRIPPED="${CFIFIX_DIR}/libcfidbg_stripped.so" CFI_DBG_DEBUG="${CFIFIX_DIR}/libcfidbg.debug"
  CFI_DRAP="${CFIFIX_DRAP}" CFI_INSN="${CFIFIX_DIR}/libcfiinsn.so"
  CFI_INSN_NOCFI="${CFIFIX_DIR}/libcfiinsn_nocfi.so")
if(CFIFIX_GCC)
  add_dependencies(test_cfi cfifix_drap)
endif()

# Row by row against readelf --debug-dump=frames-interp (Debian 12's packages: libc6,
# libpython3.11, libssl3, python3.11-minimal; scripts/install-deps).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(CFI_SYSLIB /usr/lib/x86_64-linux-gnu)
add_test(NAME unit.cfi_readelf
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/unit/check_cfi_readelf.py
                 $<TARGET_FILE:profd-cfi> ${CFI_SYSLIB}/libc.so.6 ${CFI_SYSLIB}/libpython3.11.so.1.0
                 ${CFI_SYSLIB}/libcrypto.so.3 /usr/bin/python3.11)
set_tests_properties(unit.cfi_readelf PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 300)
