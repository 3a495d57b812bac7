#pragma once
/// Compiles the structured-output constraint of every request the scheduler
/// receives before the request is admitted, so that a constraint that cannot
/// be enforced is the caller's INVALID_ARGUMENT and never reaches a worker
/// (where it would fail only after taking KV slots and a place in a batch —
/// or, before core/structured bounded its work, take the worker down).
///
/// Compiles run on a small CpuPool of their own: never on a gRPC callback
/// thread (they serve every call of the process) nor on the SchedulerLoop
/// thread (it owns every batch). The compilers bound their own work
/// (core/structured/limits.h), so a compile is short; a bounded queue keeps a
/// flood of distinct schemas from growing without limit. Each distinct spec is
/// compiled once: a structured::GrammarCache keeps the results, refusals
/// included, so a client repeating one schema costs a lookup.

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "core/common/cpu_pool.h"
#include "core/common/structured_output.h"
#include "core/structured/compile.h"

namespace orca::scheduler {

class ConstraintCompiler {
 public:
  struct Options {
    int num_threads = 2;
    /// Compiles that may wait for a thread; beyond, Compile answers RESOURCE_EXHAUSTED.
    int64_t max_queued = 256;
    /// Distinct specs whose compiled grammar (or refusal) is kept.
    size_t cache_capacity = 256;
  };
  /// Called exactly once with the outcome of a Compile.
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  /// InvalidArgument naming the option when one is out of range.
  static absl::StatusOr<std::unique_ptr<ConstraintCompiler>> Create(Options options);
  /// Stop().
  ~ConstraintCompiler();

  /// Compiles `spec` and calls `done`: OK when it compiles, InvalidArgument
  /// "'json_schema' cannot be enforced: <the compiler's reason>" (the field as
  /// sampling_limits.h's StructuredOutputField names it) when it does not — on
  /// a pool thread. Inline: OK for kNone, ResourceExhausted when max_queued
  /// compiles wait, Unavailable once stopped. Never blocks.
  void Compile(StructuredOutputSpec spec, Done done);
  /// Answers the compiles still waiting with Unavailable and waits for the running ones. Idempotent.
  void Stop();

  /// Specs compiled so far (the cache's misses): a spec seen before is not compiled again.
  int64_t num_compiled() const { return cache_.misses(); }

 private:
  explicit ConstraintCompiler(std::unique_ptr<CpuPool> pool, size_t cache_capacity)
      : pool_(std::move(pool)), cache_(cache_capacity) {}

  std::unique_ptr<CpuPool> pool_;
  structured::GrammarCache cache_;
  std::atomic<bool> stopped_{false};
};

}  // namespace orca::scheduler
