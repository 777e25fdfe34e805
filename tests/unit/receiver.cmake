# The export tests' stand-in profile backend (tests/receiver/receiver.py), checked on its own:
# Python from scripts/test-venv (made on the first run, hence the long timeout), no root.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME unit.receiver
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/receiver/test_receiver.py)
set_tests_properties(unit.receiver PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 600)
