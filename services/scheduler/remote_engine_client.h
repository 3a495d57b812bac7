#pragma once
/// The engine as a pipeline of worker processes (paper §4.1): iterations go
/// to stage 0 as control messages over one gRPC stream, results come back
/// from the last stage over another. The client runs sessions: it waits for
/// every stage to have loaded its weights, starts a session (which makes all
/// stages drop old state and form the data plane), and serves iterations
/// until a stage fails — a broken stream, a failed probe, or an iteration not
/// back within `worker_timeout` — then reports not-ready and starts over.

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/scheduler/engine_client.h"

namespace orca::scheduler {

class RemoteEngineClient final : public EngineClient {
 public:
  struct Options {
    std::vector<std::string> workers;                     ///< stage addresses, in order
    absl::Duration worker_timeout = absl::Seconds(30);    ///< an iteration must be back in this long
    absl::Duration session_timeout = absl::Seconds(120);  ///< forming a session's data plane
    absl::Duration probe_interval = absl::Seconds(1);     ///< liveness probes of every stage
    std::string model_name;
    /// How long Create() waits for every stage to report its weights loaded (zero: forever).
    absl::Duration startup_timeout = absl::ZeroDuration();
  };

  /// Connects and waits until every stage has loaded its weights, to learn the
  /// model's facts (vocabulary, context, EOS ids, KV slots).
  static absl::StatusOr<std::unique_ptr<RemoteEngineClient>> Create(Options options);
  ~RemoteEngineClient() override;

  absl::Status Start(OutcomeCallback on_outcome, StateCallback on_state) override;
  void Stop() override;
  void Submit(sched::IterationPlan plan) override;
  void Release(std::vector<sched::RequestId> ids) override;
  EngineInfo info() const override { return info_; }
  bool ready() const override { return ready_.load(); }

 private:
  using Outgoing = std::variant<sched::IterationPlan, std::vector<sched::RequestId>>;
  struct Session;

  RemoteEngineClient(Options options, std::vector<std::unique_ptr<v1::Worker::Stub>> stubs, EngineInfo info)
      : options_(std::move(options)), stubs_(std::move(stubs)), info_(std::move(info)) {}
  void Manage();
  absl::Status AllLoaded();
  absl::Status RunSession(uint64_t session_id);
  /// Waits until every stage has connected its peers (the last stage answers iteration 0).
  absl::Status AwaitSessionReady(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  /// Waits up to one poll for work and takes it (marking its plans outstanding); an error
  /// when stopping, when the session broke, or when an iteration is overdue.
  absl::Status TakeOutgoing(std::deque<Outgoing>* batch) ABSL_LOCKS_EXCLUDED(mu_);
  /// Writes `batch` to stage 0's control stream.
  absl::Status SendOutgoing(Session& session, std::deque<Outgoing>& batch);
  absl::Status Probe(uint64_t session_id);
  void ReadResults(Session* session);
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
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<sched::IterationId, absl::Time> outstanding_ ABSL_GUARDED_BY(mu_);
  std::string broken_ ABSL_GUARDED_BY(mu_);  // why the current session failed ("" while healthy)
  bool session_ready_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace orca::scheduler
