#pragma once
/// The real CPU engine behind the simulation loop: a sim::StepRunner that runs each planned
/// iteration through core/engine's Engine and reports the measured wall time of Step().
///
/// Time accounting: sim/simulation.h advances a virtual clock by the reported
/// elapsed time, so every iteration costs exactly what the engine really took, while idle
/// gaps between arrivals cost no wall time. What is not counted is the scheduler's own
/// decision time and the service plumbing (gRPC, gateway, HTTP); bench/pipeline's
/// orca_pipeline_bench measures those on real processes.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/engine/engine.h"
#include "sim/step_runner.h"

namespace orca::bench {

class EngineStepRunner : public sim::StepRunner {
 public:
  /// Borrows `engine` (one stage holding the whole model; it must outlive the runner) and
  /// frees every request it still holds, so each runner starts from an empty KV pool.
  explicit EngineStepRunner(engine::Engine* engine);

  absl::StatusOr<sim::StepOutcome> Run(const sched::IterationPlan& plan) override;
  absl::Status Release(absl::Span<const sched::RequestId> request_ids) override;
  int32_t num_stages() const override { return 1; }
  std::string Describe() const override;

 private:
  engine::Engine* engine_;
  engine::StepOutput output_;
};

}  // namespace orca::bench
