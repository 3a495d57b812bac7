#include "services/scheduler/constraint_compiler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/sampling_limits.h"
#include "core/common/status_macros.h"

namespace orca::scheduler {

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::Create(Options options) {
  if (options.cache_capacity < 1) return absl::InvalidArgumentError("cache_capacity must be at least 1");
  ORCA_ASSIGN_OR_RETURN(
      std::unique_ptr<CpuPool> pool,
      CpuPool::Create({.num_threads = options.num_threads, .max_queued = options.max_queued, .name = "orca-grammar"}));
  return std::unique_ptr<ConstraintCompiler>(new ConstraintCompiler(std::move(pool), options.cache_capacity));
}

ConstraintCompiler::~ConstraintCompiler() { Stop(); }

void ConstraintCompiler::Stop() {
  stopped_ = true;
  pool_->Stop();
}

void ConstraintCompiler::Compile(StructuredOutputSpec spec, Done done) {
  if (!spec.enabled()) {
    std::move(done)(absl::OkStatus());
    return;
  }
  // The pool destroys a refused task unrun: `done` waits in a shared slot so that the refusal can still answer.
  auto slot = std::make_shared<Done>(std::move(done));
  const bool queued = pool_->TrySubmit([this, spec = std::move(spec), slot](CpuPool::Mode mode) {
    if (mode == CpuPool::Mode::kCancelled) {
      std::move (*slot)(absl::UnavailableError("the scheduler is shutting down; retry the request"));
      return;
    }
    absl::StatusOr<std::shared_ptr<const structured::Grammar>> grammar = cache_.Get(spec);
    if (grammar.ok()) {
      std::move (*slot)(absl::OkStatus());
      return;
    }
    std::move (*slot)(absl::InvalidArgumentError(
        absl::StrCat("'", StructuredOutputField(spec.kind), "' cannot be enforced: ", grammar.status().message())));
  });
  if (queued) return;
  std::move (*slot)(stopped_.load() ? absl::UnavailableError("the scheduler is shutting down; retry the request")
                                    : absl::ResourceExhaustedError(absl::StrCat(
                                          "too many structured-output constraints are waiting to compile (",
                                          pool_->max_queued(), "); retry the request")));
}

}  // namespace orca::scheduler
