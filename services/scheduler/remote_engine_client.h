#pragma once
/// The engine as a pipeline of worker processes (paper §4.1): iterations go
/// to stage 0 as control messages over one gRPC stream, results come back
/// from the last stage over another. The client runs sessions: it waits for
/// every stage to have loaded its weights, starts a session (which makes all
/// stages drop old state and form the data plane), and serves iterations
/// until a stage fails, then reports not-ready and starts over.
///
/// Liveness comes from the workers themselves (issue 11): every stage streams
/// heartbeats from a thread of its own, whatever it computes. A stage is
/// declared dead only when it has been silent for `worker_timeout` (or its
/// stream broke: the process is gone), so an iteration may take as long as it
/// takes and a stall shorter than the timeout costs latency, not requests. The
/// heartbeats also carry progress: a stage that has waited `worker_timeout`
/// for activations its upstream stage reports as sent has lost its data plane.
///
///   ┌─▶ WAIT_LOADED ──all stages loaded, block sizes agree──▶ FORMING ──last stage: connected──▶ SERVING
///   │        ▲                                                   │                                  │
///   └────────┴──────── a stage silent / gone / cut off, a stream broke, stop ◀─────────────────────┘
///                      (not ready; plans made for the ended session are dropped)

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/common/internal_auth.h"
#include "services/scheduler/engine_client.h"

namespace orca::scheduler {

class RemoteEngineClient final : public EngineClient {
 public:
  struct Options {
    std::vector<std::string> workers;  ///< stage addresses, in order
    /// A stage silent (no heartbeat) this long is dead, stopped or cut off.
    absl::Duration worker_timeout = absl::Seconds(5);
    /// How often stages send heartbeats; zero = worker_timeout / 10 (at most 500 ms).
    absl::Duration heartbeat_interval = absl::ZeroDuration();
    absl::Duration session_timeout = absl::Seconds(120);  ///< forming a session's data plane
    std::string model_name;
    /// The scheduler's KV block size: every stage must use the same (0 = take the stages').
    int32_t kv_block_size = 0;
    /// How long Create() waits for every stage to report its weights loaded (zero: forever).
    absl::Duration startup_timeout = absl::ZeroDuration();
    /// Sent on every call to the stages (they require it).
    services::InternalAuth internal_auth = services::InternalAuth::Insecure();
  };

  /// Connects and waits until every stage has loaded its weights, to learn the
  /// model's facts (vocabulary, context, EOS ids, KV slots and block size).
  /// FailedPrecondition when the stages disagree with each other or with
  /// `kv_block_size` (each value named).
  static absl::StatusOr<std::unique_ptr<RemoteEngineClient>> Create(Options options);
  ~RemoteEngineClient() override;

  absl::Status Start(OutcomeCallback on_outcome, StateCallback on_state) override;
  void Stop() override;
  void Submit(sched::IterationPlan plan, uint64_t session) override;
  void Release(std::vector<sched::RequestId> ids, uint64_t session) override;
  EngineInfo info() const override { return info_; }
  bool ready() const override { return ready_.load(); }

 private:
  using Outgoing = std::variant<sched::IterationPlan, std::vector<sched::RequestId>>;
  struct Session;
  struct StageLiveness {
    absl::Time last_heard;
    v1::Heartbeat last;
    bool joined = false;     // has reported this session
    bool connected = false;  // has reported this session's data plane up
  };

  RemoteEngineClient(Options options, std::vector<std::unique_ptr<v1::Worker::Stub>> stubs, EngineInfo info)
      : options_(std::move(options)), stubs_(std::move(stubs)), info_(std::move(info)) {}
  void Manage();
  absl::Status AllLoaded();
  absl::Status RunSession(uint64_t session_id);
  void OpenStreams(Session* session);
  absl::Status AwaitConnected(Session* session);
  absl::Status Serve(Session* session);
  void ReadResults(Session* session);
  void WatchStage(Session* session, size_t stage);
  void Watchdog(Session* session);
  /// Why the session must end now, or OK. Called every few ms while it runs.
  absl::Status CheckLiveness(uint64_t session_id, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Stopping();

  Options options_;
  std::vector<std::unique_ptr<v1::Worker::Stub>> stubs_;
  EngineInfo info_;
  OutcomeCallback on_outcome_;
  StateCallback on_state_;
  std::atomic<bool> ready_{false};
  std::thread manager_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t serving_session_ ABSL_GUARDED_BY(mu_) = 0;  // plans for any other session are dropped
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mu_);
  std::string broken_ ABSL_GUARDED_BY(mu_);  // why the current session failed ("" while healthy)
  bool session_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool session_over_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<StageLiveness> stages_ ABSL_GUARDED_BY(mu_);
  absl::Time last_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::scheduler
