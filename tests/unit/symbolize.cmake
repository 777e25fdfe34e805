# Symbolizer unit test and its ELF fixtures: a PIE executable (C and C++) linking a shared
# library, a stripped copy with a .gnu_debuglink, a stripped copy found by build-id only, and
# a stripped library (.dynsym only).
set(SYMFIX_DIR ${CMAKE_CURRENT_BINARY_DIR}/symfix)
set(SYMFIX_FLAGS -O1 -g -fno-sanitize=all -fno-omit-frame-pointer)

add_library(symfix_lib SHARED fixtures/sym/fix_lib.c)
set_target_properties(symfix_lib PROPERTIES OUTPUT_NAME symfix LIBRARY_OUTPUT_DIRECTORY ${SYMFIX_DIR})
target_compile_options(symfix_lib PRIVATE ${SYMFIX_FLAGS})
# A non-zero first segment address: the load bias is not "mapping start minus offset".
target_link_options(symfix_lib PRIVATE -Wl,--build-id -Wl,-Ttext-segment=0x400000 -fno-sanitize=all
                    -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sym/fix_lib.map)
set_target_properties(symfix_lib PROPERTIES
                      LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sym/fix_lib.map)

add_executable(symfix fixtures/sym/fix_main.c fixtures/sym/fix_cxx.cc)
set_target_properties(symfix PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${SYMFIX_DIR})
target_compile_options(symfix PRIVATE ${SYMFIX_FLAGS} -fPIE)
target_link_options(symfix PRIVATE -pie -Wl,--build-id -fno-sanitize=all)
target_link_libraries(symfix PRIVATE symfix_lib)

add_custom_command(
  OUTPUT ${SYMFIX_DIR}/symfix.debug ${SYMFIX_DIR}/symfix_dl ${SYMFIX_DIR}/symfix_bid
         ${SYMFIX_DIR}/libsymfix_stripped.so
  COMMAND ${CMAKE_OBJCOPY} --only-keep-debug symfix symfix.debug
  COMMAND ${CMAKE_OBJCOPY} --strip-all --add-gnu-debuglink=symfix.debug symfix symfix_dl
  COMMAND ${CMAKE_OBJCOPY} --strip-all symfix symfix_bid
  COMMAND ${CMAKE_OBJCOPY} --strip-all $<TARGET_FILE_NAME:symfix_lib> libsymfix_stripped.so
  DEPENDS symfix symfix_lib
  WORKING_DIRECTORY ${SYMFIX_DIR}
  COMMENT "symbolizer fixtures: debug file, debuglink and build-id copies")
add_custom_target(symfix_variants ALL
  DEPENDS ${SYMFIX_DIR}/symfix.debug ${SYMFIX_DIR}/symfix_dl ${SYMFIX_DIR}/symfix_bid
          ${SYMFIX_DIR}/libsymfix_stripped.so)

profd_unit(test_symbolize)
add_dependencies(test_symbolize symfix symfix_lib symfix_variants)
target_compile_definitions(test_symbolize PRIVATE SYMFIX_DIR="${SYMFIX_DIR}")
# Paths are built with snprintf into PATH_MAX buffers; truncation is checked where it matters.
target_compile_options(test_symbolize PRIVATE -Wno-format-truncation)

# Not a test: the hot-path micro-benchmark (bench/bench_symbolize.c), built on request.
add_executable(bench_symbolize EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/bench/bench_symbolize.c)
target_link_libraries(bench_symbolize PRIVATE profd_core)
target_include_directories(test_symbolize PRIVATE ${CMAKE_SOURCE_DIR}/daemon/symbolize)

# PLT stub names against objdump's, on programs the test builds with the system's compiler.
profd_unit(test_plt)
target_compile_options(test_plt PRIVATE -Wno-format-truncation)
target_include_directories(test_plt PRIVATE ${CMAKE_SOURCE_DIR}/daemon/symbolize)

# The symbol index: lookups at function bounds, names read on demand, files that change under it.
profd_unit(test_sym_index)
target_include_directories(test_sym_index PRIVATE ${CMAKE_SOURCE_DIR}/daemon/symbolize)
target_link_libraries(test_sym_index PRIVATE PkgConfig::LIBELF)
