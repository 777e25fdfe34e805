# The build's boundaries (issue 24 item 10): no target of the daemon or of a shared library
# compiles a source of client/ or sees its headers, and no target of profctl those of daemon/.
# Each target's sources and include directories (with those its libraries pass on) are written
# when the build system is generated; unit.layout checks them (layout_check.cmake).
function(profd_layout_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    # The tests and benchmarks link whatever they exercise.
    if(NOT sub MATCHES "/(tests|bench)(/|$)")
      profd_layout_targets(${sub} more)
      list(APPEND targets ${more})
    endif()
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

profd_layout_targets(${CMAKE_SOURCE_DIR} layout_targets)
set(layout_lines "")
foreach(t ${layout_targets})
  get_target_property(type ${t} TYPE)
  if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
    string(APPEND layout_lines
      "${t}|$<TARGET_PROPERTY:${t},SOURCE_DIR>|$<JOIN:$<TARGET_PROPERTY:${t},SOURCES>,;>|"
      "$<JOIN:$<TARGET_PROPERTY:${t},INCLUDE_DIRECTORIES>,;>\n")
  endif()
endforeach()
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/layout-targets.txt CONTENT "${layout_lines}")
add_test(NAME unit.layout
  COMMAND ${CMAKE_COMMAND} -DLIST=${CMAKE_BINARY_DIR}/layout-targets.txt
          -DSRC=${CMAKE_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/unit/layout_check.cmake)
set_tests_properties(unit.layout PROPERTIES LABELS unit TIMEOUT 60)
