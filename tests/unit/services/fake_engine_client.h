#pragma once
// An EngineClient for scheduler tests that stands in for the worker pipeline:
// it answers every iteration (on its own thread, after `step`) with one token
// per sampled request, (request id + position) % 97, or fails iterations while
// set_fail(true); it records the sampling parameters of every request it was
// asked to set up — what would have reached a worker — so a test can assert
// that something never got there; SetReady plays a pipeline going down and
// coming back (each return a new session, as with the remote client).

#include <atomic>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/common/sampling_params.h"
#include "services/scheduler/engine_client.h"

namespace orca::scheduler::testing {

class FakeEngineClient final : public EngineClient {
 public:
  struct Options {
    int32_t vocab_size = 100;
    int32_t max_context = 256;
    int64_t kv_slots = 1024;
    std::string model_name = "fake";
    /// The model's sliding window and the workers' pool for those layers' KV (0: none).
    int32_t sliding_window = 0;
    int64_t kv_local_slots = 0;
    /// How long each iteration takes.
    absl::Duration step = absl::ZeroDuration();
  };
  explicit FakeEngineClient(Options options) : options_(std::move(options)), step_(options_.step) {}
  FakeEngineClient() : FakeEngineClient(Options{}) {}
  ~FakeEngineClient() override { Stop(); }

  absl::Status Start(OutcomeCallback on_outcome, StateCallback on_state) override {
    on_outcome_ = std::move(on_outcome);
    on_state_ = std::move(on_state);
    on_state_(is_ready_, is_ready_ ? "" : "no workers", session_);
    thread_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }
  void Stop() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  void Submit(sched::IterationPlan plan, uint64_t session) override {
    absl::MutexLock lock(&mu_);
    if (session != session_) return;  // as the remote client does
    ++submitted_;
    for (const sched::ScheduledRequest& r : plan.requests)
      if (r.new_request.has_value()) set_up_.push_back(r.new_request->sampling);
    plans_.push_back(std::move(plan));
  }
  void Release(std::vector<sched::RequestId>, uint64_t) override {}
  EngineInfo info() const override {
    EngineInfo i;
    i.model_name = options_.model_name;
    i.vocab_size = options_.vocab_size;
    i.max_context = options_.max_context;
    i.eos_token_ids = {options_.vocab_size - 1};
    i.kv_slots = options_.kv_slots;
    i.sliding_window = options_.sliding_window;
    i.kv_local_slots = options_.kv_local_slots;
    return i;
  }
  bool ready() const override { return is_ready_; }

  /// The sampling parameters of every request the engine was asked to set up, in order.
  std::vector<SamplingParams> set_up() const {
    absl::MutexLock lock(&mu_);
    return set_up_;
  }
  /// How many iteration plans of the current session were submitted.
  int submitted() const {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  /// How long each iteration takes from now on.
  void set_step(absl::Duration step) {
    absl::MutexLock lock(&mu_);
    step_ = step;
  }
  /// While true, every iteration fails with "stage 1: injected failure".
  void set_fail(bool fail) { fail_ = fail; }
  /// Reports the pipeline down ("worker 1 died") or up again; each return to
  /// ready is a new session.
  void SetReady(bool ready) {
    is_ready_ = ready;
    if (ready) {
      absl::MutexLock lock(&mu_);
      ++session_;
    }
    on_state_(ready, ready ? "" : "worker 1 died", session_);
  }

 private:
  void Loop() {
    while (true) {
      sched::IterationPlan plan;
      absl::Duration step;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](FakeEngineClient* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return e->stop_ || !e->plans_.empty(); },
            this));
        if (stop_) return;
        plan = std::move(plans_.front());
        plans_.pop_front();
        step = step_;
      }
      absl::SleepFor(step);
      IterationOutcome outcome;
      outcome.iteration_id = plan.iteration_id;
      if (fail_) {
        outcome.status = absl::InternalError("stage 1: injected failure");
      } else {
        for (const sched::ScheduledRequest& r : plan.requests) {
          if (!r.sample) continue;  // a prompt chunk short of the prompt's end samples nothing
          sched::RequestResult result;
          result.request_id = r.request_id;
          result.token.token_id = static_cast<int32_t>((r.request_id + r.start_position) % 97);
          outcome.results.push_back(result);
        }
      }
      on_outcome_(std::move(outcome));
    }
  }

  const Options options_;
  OutcomeCallback on_outcome_;
  StateCallback on_state_;
  std::atomic<bool> is_ready_{true};
  std::atomic<bool> fail_{false};
  std::atomic<uint64_t> session_{1};
  mutable absl::Mutex mu_;
  std::deque<sched::IterationPlan> plans_ ABSL_GUARDED_BY(mu_);
  std::vector<SamplingParams> set_up_ ABSL_GUARDED_BY(mu_);
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration step_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orca::scheduler::testing
