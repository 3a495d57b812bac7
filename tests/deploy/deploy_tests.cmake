# Validation of the deploy artifacts with real tools (helm, kubernetes-models,
# ajv, tsc, yamllint, apt metadata), as node:test files. Included from
# tests/unit/operator/CMakeLists.txt (and from tests/deploy/CMakeLists.txt if
# tests/ adds that directory); include_guard registers them once.
#
# They need scripts/bootstrap.sh's tools (node_modules, .tools/helm) and the
# orca-operator binary of this build tree; without them they fail and say so.
include_guard(GLOBAL)

find_program(ORCA_NODE node)
if(NOT ORCA_NODE)
  message(WARNING "node not found: the deploy validation tests (tests/deploy) are not registered; run scripts/bootstrap.sh")
else()
  foreach(name chart crd_operator docker render_rules cel)
    add_test(NAME deploy_${name}_test
             COMMAND ${ORCA_NODE} --test ${CMAKE_SOURCE_DIR}/tests/deploy/${name}.test.mjs
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(deploy_${name}_test PROPERTIES
      LABELS "e2e;deploy"
      TIMEOUT 600
      ENVIRONMENT "ORCA_SOURCE_DIR=${CMAKE_SOURCE_DIR};ORCA_BINARY_DIR=${CMAKE_BINARY_DIR}")
  endforeach()
endif()
