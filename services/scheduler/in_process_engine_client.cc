#include "services/scheduler/in_process_engine_client.h"

#include "core/common/logging.h"
#include "services/common/control_convert.h"

namespace orca::scheduler {

absl::StatusOr<std::unique_ptr<InProcessEngineClient>> InProcessEngineClient::Create(
    const engine::Engine::Options& options, std::string model_name) {
  auto engine = engine::Engine::Create(options);
  if (!engine.ok()) return engine.status();
  EngineInfo info;
  const engine::ModelConfig& c = (*engine)->config();
  info.model_name = std::move(model_name);
  info.vocab_size = c.vocab_size;
  info.max_context = c.max_position;
  info.eos_token_ids = c.eos_token_ids;
  info.kv_slots = (*engine)->kv_slots_total();
  info.kv_block_size = options.kv_block_size;
  info.sliding_window = (*engine)->sliding_window();
  info.kv_local_slots = (*engine)->kv_local_slots_total();
  info.num_stages = 1;
  return std::unique_ptr<InProcessEngineClient>(new InProcessEngineClient(std::move(*engine), std::move(info)));
}

InProcessEngineClient::~InProcessEngineClient() { Stop(); }

absl::Status InProcessEngineClient::Start(OutcomeCallback on_outcome, StateCallback on_state) {
  on_outcome_ = std::move(on_outcome);
  if (on_state) on_state(true, "", kSession);
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void InProcessEngineClient::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void InProcessEngineClient::Submit(sched::IterationPlan plan, uint64_t) {
  absl::MutexLock lock(&mu_);
  queue_.emplace_back(std::move(plan));
}

void InProcessEngineClient::Release(std::vector<sched::RequestId> ids, uint64_t) {
  absl::MutexLock lock(&mu_);
  queue_.emplace_back(std::move(ids));
}

void InProcessEngineClient::Loop() {
  engine::StepOutput output;
  while (true) {
    Work work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](InProcessEngineClient* c)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) { return c->stop_ || !c->queue_.empty(); },
          this));
      if (stop_) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    if (auto* ids = std::get_if<std::vector<sched::RequestId>>(&work)) {
      for (sched::RequestId id : *ids) engine_->Release(id);
      continue;
    }
    const sched::IterationPlan& plan = std::get<sched::IterationPlan>(work);
    IterationOutcome outcome;
    outcome.iteration_id = plan.iteration_id;
    outcome.status = engine_->Step(services::PlanToStepInput(plan), nullptr, &output);
    if (outcome.status.ok()) {
      outcome.results = services::SamplesToResults(output.samples);
      services::AddPromptLogprobs(output.prompt_logprobs, &outcome.results);
      services::AddFailures(output.failures, &outcome.results);
      outcome.stage_timings.push_back({0, output.timings.compute_micros, output.timings.comm_micros});
    } else {
      ORCA_LOG(ERROR).With("iteration_id", plan.iteration_id) << "iteration failed: " << outcome.status;
    }
    on_outcome_(std::move(outcome));
  }
}

}  // namespace orca::scheduler
