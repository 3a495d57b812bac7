# Shared helpers for Orca targets.

# Warnings for Orca's own code (generated code and third-party headers are exempt).
function(orca_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)
endfunction()

# orca_library(name SOURCES ... DEPS ...)
function(orca_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  orca_warnings(${name})
endfunction()

# Sanitizer builds run several times slower (scripts/sanitize.sh sets 4): every orca_test's
# TIMEOUT is multiplied by this, since a test's own TIMEOUT wins over `ctest --timeout`.
set(ORCA_TEST_TIMEOUT_SCALE 1 CACHE STRING "Multiplier for every orca_test TIMEOUT (sanitizer builds)")

# orca_test(name SOURCES ... DEPS ... LABELS ... [TIMEOUT s])
# One GoogleTest executable registered as one CTest test with labels.
function(orca_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  orca_warnings(${name})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * ${ORCA_TEST_TIMEOUT_SCALE}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "ORCA_SOURCE_DIR=${CMAKE_SOURCE_DIR};ORCA_BINARY_DIR=${CMAKE_BINARY_DIR};ORCA_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared;OMP_NUM_THREADS=2")
endfunction()
