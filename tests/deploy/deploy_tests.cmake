# Validation of the deploy artifacts with real tools (helm, kubernetes-models,
# ajv, yamllint). Included from tests/unit/operator/CMakeLists.txt (and from
# tests/deploy/CMakeLists.txt if tests/ adds that directory); registered once.
include_guard(GLOBAL)
