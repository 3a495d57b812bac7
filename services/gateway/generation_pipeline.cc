#include "services/gateway/generation_pipeline.h"

#include <vector>

#include "services/gateway/generation_job.h"

namespace orca::gateway {

GenerationPipeline::GenerationPipeline(const text::Tokenizer* tokenizer, SchedulerRouter* router)
    : tokenizer_(tokenizer), router_(router) {}

GenerationPipeline::~GenerationPipeline() {
  CancelAll();
  WaitIdle(absl::Seconds(5));
}

absl::StatusOr<std::shared_ptr<GenerationHandle>> GenerationPipeline::Start(
    GenerationRequest request, std::shared_ptr<GenerationObserver> observer) {
  if (request.prompts.empty() || request.n < 1) return absl::InvalidArgumentError("request has no choices");
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_job_id_++;
  }
  auto job = std::make_shared<GenerationJob>(id, this, tokenizer_, std::move(request), std::move(observer));
  {
    absl::MutexLock lock(&mu_);
    jobs_[id] = job;
  }
  absl::Status status = job->Start(*router_);
  if (!status.ok()) {
    Unregister(id);
    return status;
  }
  return std::shared_ptr<GenerationHandle>(std::move(job));
}

void GenerationPipeline::Unregister(uint64_t job_id) {
  absl::MutexLock lock(&mu_);
  jobs_.erase(job_id);
}

void GenerationPipeline::CancelAll() {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, weak] : jobs_) {
      if (auto job = weak.lock()) jobs.push_back(std::move(job));
    }
  }
  for (auto& job : jobs) job->Cancel();
}

void GenerationPipeline::FailAll(const absl::Status& status) {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, weak] : jobs_) {
      if (auto job = weak.lock()) jobs.push_back(std::move(job));
    }
  }
  for (auto& job : jobs) job->Abort(status);
}

bool GenerationPipeline::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return jobs_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

int64_t GenerationPipeline::num_active() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(jobs_.size());
}

}  // namespace orca::gateway
