#pragma once
/// The generation pipeline: tokens → scheduler(s) → incremental detokenization
/// → stop strings → events. Transport-independent: the OpenAI HTTP API and the
/// gRPC API both drive it with a GenerationRequest and a GenerationObserver.
///
/// Each of a request's `prompts × n` choices is one streaming Generate call to
/// a scheduler chosen by the router. No thread is used per request: work runs
/// on gRPC's callback threads, serialized per request.

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/text/tokenizer.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

class GenerationJob;

/// A running request.
class GenerationHandle {
 public:
  virtual ~GenerationHandle() = default;
  /// Cancels every choice at its scheduler at once (e.g. the client went
  /// away). Nothing more reaches the observer. Idempotent, any thread.
  virtual void Cancel() = 0;
};

class GenerationPipeline {
 public:
  /// Both must outlive the pipeline.
  GenerationPipeline(const text::Tokenizer* tokenizer, SchedulerRouter* router);
  ~GenerationPipeline();

  /// Starts every choice. Failures before anything started (no scheduler
  /// ready) are returned here; later ones reach `observer->OnError`.
  absl::StatusOr<std::shared_ptr<GenerationHandle>> Start(GenerationRequest request,
                                                          std::shared_ptr<GenerationObserver> observer);

  /// Cancels every running request (shutdown): nothing more reaches their observers.
  void CancelAll();
  /// Ends every running request now with `status` (their observers' OnError:
  /// an error event or body), cancelling their scheduler calls. The end of a drain.
  void FailAll(const absl::Status& status);
  /// Waits until every request's scheduler calls have finished; false on timeout.
  bool WaitIdle(absl::Duration timeout);
  /// Requests with scheduler calls still open.
  int64_t num_active() const;

 private:
  friend class GenerationJob;
  void Unregister(uint64_t job_id);

  const text::Tokenizer* const tokenizer_;
  SchedulerRouter* const router_;
  mutable absl::Mutex mu_;
  uint64_t next_job_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::weak_ptr<GenerationJob>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::gateway
