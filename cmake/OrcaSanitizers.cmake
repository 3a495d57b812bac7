# Sanitizer and fuzzing builds (a separate build tree; see scripts/sanitize.sh).
#
#   -DORCA_SANITIZE=address,undefined   ASan + UBSan on everything Orca compiles
#   -DORCA_SANITIZE=thread              TSan (scripts/tsan.sh: with an instrumented Abseil)
#   -DORCA_FUZZ=ON                      libFuzzer targets in tests/fuzz (clang only)
#
# Only Orca's own code is instrumented; system libraries (gRPC, Abseil, oneDNN) are not
# (scripts/tsan.sh builds Abseil itself with TSan: see docs/DEVELOPING.md).
set(ORCA_SANITIZE "" CACHE STRING "Sanitizers for Orca's code: address,undefined | thread | empty")
option(ORCA_FUZZ "Build the libFuzzer targets (requires clang)" OFF)
set(ORCA_FUZZ_SECONDS 30 CACHE STRING "How long each fuzz test fuzzes after replaying its seeds")
set(ORCA_FUZZ_RUNS 0 CACHE STRING "With ORCA_FUZZ_SECONDS 0: inputs each fuzz test explores (reproducible)")
set(ORCA_FUZZ_SEED 1 CACHE STRING "libFuzzer's random seed for the ORCA_FUZZ_RUNS exploration")

if(ORCA_SANITIZE)
  if(ORCA_SANITIZE MATCHES "thread" AND ORCA_SANITIZE MATCHES "address")
    message(FATAL_ERROR "ORCA_SANITIZE: thread cannot be combined with address")
  endif()
  # Frame pointers give readable reports; -fno-sanitize-recover makes every UBSan finding fatal.
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${ORCA_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${ORCA_SANITIZE})
  if(ORCA_SANITIZE MATCHES "thread")
    # scripts/tsan.sh links a static, TSan-instrumented Abseil (absl_DIR). Exporting the
    # executables' symbols makes the absl::Mutex calls of Debian's libgrpc.so bind to that
    # instrumented copy rather than to the uninstrumented libabsl_*.so gRPC was linked with
    # (ELF interposition: same version, same inline namespace), so TSan sees gRPC's locks.
    add_link_options(-rdynamic)
  endif()
  message(STATUS "Orca sanitizers: ${ORCA_SANITIZE}")
endif()

if(ORCA_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ORCA_FUZZ=ON needs clang (libFuzzer); configure with CC=clang CXX=clang++")
endif()
