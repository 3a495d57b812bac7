#include "bench/pipeline/engine_step_runner.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "services/common/control_convert.h"

namespace orca::bench {

EngineStepRunner::EngineStepRunner(engine::Engine* engine) : engine_(engine) { engine_->ReleaseAll(); }

absl::StatusOr<sim::StepOutcome> EngineStepRunner::Run(const sched::IterationPlan& plan) {
  const engine::StepInput input = services::PlanToStepInput(plan);
  // Only Step() is on the clock: the plan conversion above stands in for the control
  // message a worker decodes, which the services measure separately.
  const auto start = std::chrono::steady_clock::now();
  const absl::Status stepped = engine_->Step(input, nullptr, &output_);
  const auto end = std::chrono::steady_clock::now();
  if (!stepped.ok()) return Annotate(stepped, absl::StrCat("iteration ", plan.iteration_id));
  sim::StepOutcome outcome;
  outcome.elapsed = absl::FromChrono(end - start);
  outcome.results = services::SamplesToResults(output_.samples);
  services::AddFailures(output_.failures, &outcome.results);
  return outcome;
}

absl::Status EngineStepRunner::Release(absl::Span<const sched::RequestId> request_ids) {
  for (sched::RequestId id : request_ids) engine_->Release(id);
  return absl::OkStatus();
}

std::string EngineStepRunner::Describe() const {
  return absl::StrCat("real CPU engine (", engine_->backend_name(), "): ", engine_->config().Summary(), ", ",
                      engine_->kv_slots_total(), " KV slots");
}

}  // namespace orca::bench
