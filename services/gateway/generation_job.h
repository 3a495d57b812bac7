#pragma once
/// One request in flight: its choices' scheduler calls and, per choice, the
/// incremental detokenizer and stop-string matcher. Internal to the pipeline.
///
/// Choice lifecycle:
///
///   RUNNING ──finish message (stop | length)───────────▶ FINISHED
///      │    ──stop string matched (call cancelled)──────▶ FINISHED
///      │    ──error / scheduler cancel / stream broken──▶ job FAILED (all cancelled)
///      │    ──paused past max_pause (client not reading)▶ job FAILED (all cancelled)
///      │────  GenerationHandle::Cancel ─────────────────▶ job CANCELLED (all cancelled)
///      └────  Abort(status) (end of a drain) ─────────────▶ job FAILED (all cancelled)
///
/// All state is guarded by one mutex, so the observer sees one ordered
/// sequence of events whatever gRPC threads the responses arrive on.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/stop_matcher.h"
#include "core/text/tokenizer.h"
#include "services/gateway/generation_pipeline.h"
#include "services/gateway/scheduler_call.h"

namespace orca::gateway {

class GenerationJob : public GenerationHandle,
                      public SchedulerCallListener,
                      public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(uint64_t id, GenerationPipeline* pipeline, const text::Tokenizer* tokenizer, GenerationRequest request,
                std::shared_ptr<GenerationObserver> observer);
  ~GenerationJob() override;

  /// Reserves a scheduler per prompt for its n choices (all or nothing), then starts the
  /// calls; with n > 1 each prompt's choices form one group on their scheduler.
  absl::Status Start(SchedulerRouter& router);

  void Cancel() override;
  /// Ends the job now with `status` (the observer's OnError), cancelling its calls.
  void Abort(const absl::Status& status);
  void OnSchedulerResponse(int choice, const orca::v1::GenerateResponse& response) override;
  void OnSchedulerDone(int choice, const grpc::Status& status) override;
  /// Pauses a choice's call while the observer cannot take more output; a
  /// pause that ends with an error (the client read nothing for too long)
  /// fails the job with it.
  bool ReadyForMore(int choice, std::function<void()> resume) override;

 private:
  struct Choice {
    int index = 0;
    int prompt_index = 0;
    std::unique_ptr<text::IncrementalDetokenizer> detokenizer;
    std::unique_ptr<text::StopMatcher> stop_matcher;  // null without stop strings
    std::shared_ptr<SchedulerCall> call;
    int32_t completion_tokens = 0;
    bool prompt_logprobs_started = false;
    bool finished = false;
    bool call_done = false;
  };

  orca::v1::GenerateRequest SchedulerRequest(const Choice& choice) const;
  /// Feeds decoded text through the stop matcher into `delta`; true when a
  /// stop string ended the choice.
  bool EmitText(Choice& choice, std::string_view text, ChoiceDelta* delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Handles the scheduler's finish message for a choice still running.
  void HandleFinish(Choice& choice, const orca::v1::GenerateResponse& response, ChoiceDelta* delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(Choice& choice, ChoiceDelta& delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelCalls() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsStopToken(int32_t id) const;
  GeneratedToken MakeToken(const orca::v1::SampledToken& sampled) const;
  /// Prompt logprobs of a response into the delta, after the prompt's first token (no logprob) on the first one.
  void AddPromptLogprobs(Choice& choice, const orca::v1::GenerateResponse& response, ChoiceDelta* delta) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t id_;
  GenerationPipeline* const pipeline_;
  const text::Tokenizer* const tokenizer_;
  const GenerationRequest request_;
  const std::vector<int32_t> eos_ids_;

  absl::Mutex mu_;
  std::shared_ptr<GenerationObserver> observer_ ABSL_GUARDED_BY(mu_);
  std::vector<Choice> choices_ ABSL_GUARDED_BY(mu_);
  int num_finished_ ABSL_GUARDED_BY(mu_) = 0;
  int num_calls_done_ ABSL_GUARDED_BY(mu_) = 0;
  /// Cancelled, failed or completed: nothing more goes to the observer.
  bool terminated_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace orca::gateway
