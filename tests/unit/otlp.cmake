# The OTLP profiles encoder, checked with the official opentelemetry-proto classes from PyPI
# (the python of scripts/test-venv, made on first use: the first run may take a minute).
profd_unit(test_otlp)
target_link_libraries(test_otlp PRIVATE profd_export_otlp)
target_compile_definitions(test_otlp PRIVATE
  TEST_VENV="${CMAKE_SOURCE_DIR}/scripts/test-venv"
  CHECK_OTLP_PY="${CMAKE_CURRENT_SOURCE_DIR}/unit/check_otlp.py")
set_tests_properties(unit.test_otlp PROPERTIES TIMEOUT 600)

# proto/otlp/ against the descriptors PyPI's opentelemetry-proto ships: same messages, field
# names, numbers, types and labels.
add_test(NAME unit.otlp_proto_upstream
  COMMAND sh -c "py=$(\"$0\") || exit 77; exec \"$py\" \"$1\" \"$2\""
    ${CMAKE_SOURCE_DIR}/scripts/test-venv ${CMAKE_CURRENT_SOURCE_DIR}/unit/check_otlp_proto.py
    ${CMAKE_SOURCE_DIR}/proto/otlp)
set_tests_properties(unit.otlp_proto_upstream PROPERTIES LABELS unit SKIP_RETURN_CODE 77
  TIMEOUT 600)
