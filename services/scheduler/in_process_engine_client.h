#pragma once
/// The engine in the scheduler's own process: a single stage (tensor-parallel
/// shards as threads) driven by one engine thread that runs queued iterations
/// in order.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/engine.h"
#include "services/scheduler/engine_client.h"

namespace orca::scheduler {

class InProcessEngineClient final : public EngineClient {
 public:
  static absl::StatusOr<std::unique_ptr<InProcessEngineClient>> Create(const engine::Engine::Options& options,
                                                                       std::string model_name);
  ~InProcessEngineClient() override;

  absl::Status Start(OutcomeCallback on_outcome, StateCallback on_state) override;
  void Stop() override;
  void Submit(sched::IterationPlan plan) override;
  void Release(std::vector<sched::RequestId> ids) override;
  EngineInfo info() const override { return info_; }
  bool ready() const override { return true; }

 private:
  using Work = std::variant<sched::IterationPlan, std::vector<sched::RequestId>>;
  InProcessEngineClient(std::unique_ptr<engine::Engine> engine, EngineInfo info)
      : engine_(std::move(engine)), info_(std::move(info)) {}
  void Loop();

  std::unique_ptr<engine::Engine> engine_;
  EngineInfo info_;
  OutcomeCallback on_outcome_;
  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orca::scheduler
