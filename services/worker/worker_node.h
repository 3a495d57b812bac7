#pragma once
/// One pipeline stage of the distributed engine (paper §4.1, Fig. 6-8): the
/// stage's layers and tensor-parallel shards (core/engine), the control
/// plane (every control message is forwarded to the next stage BEFORE this
/// stage computes it) and the data plane (core/engine/pipeline_channel.h:
/// activations to and from the neighbouring stages over Gloo on CPUs, device
/// to device over NCCL on GPUs). The last stage samples and publishes the
/// results to the engine master.
///
/// Sessions: the engine master starts a session with a control message
/// carrying a new session id; every stage then drops all request state and
/// re-forms the data plane under a rendezvous prefix naming the session, so
/// a restarted worker rejoins a clean pipeline. A new session also ends the
/// old one at once: its queued work is dropped, a data-plane wait or a
/// rendezvous still running for it is aborted, and its late messages are
/// ignored — a surviving stage never waits out a dead session's timeouts.
///
/// Liveness: a heartbeat thread of its own reports the stage's session and
/// progress to every Heartbeats subscriber (the engine master), so a stage
/// that computes a long iteration is alive and a stopped or cut-off one is
/// silent (issue 11).

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/communicator.h"
#include "core/engine/engine.h"
#include "core/metrics/orca_metrics.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/common/internal_auth.h"
#include "services/worker/worker_backend.h"

namespace orca::engine {
class PipelineChannel;
}

namespace orca::worker {

class GrpcRendezvousStore;

class WorkerNode final : public WorkerBackend {
 public:
  struct Options {
    engine::Engine::Options engine;    ///< model, stage, num_stages, tp_size, n_slots, ...
    std::vector<std::string> workers;  ///< gRPC addresses of all stages, in order
    std::string scheduler_address;     ///< rendezvous store (needed when num_stages > 1)
    /// Sent on every call to the scheduler (rendezvous) and the next stage (control).
    services::InternalAuth internal_auth = services::InternalAuth::Insecure();
    std::string deployment_id = "orca";  ///< rendezvous namespace of this engine replica
    std::string data_plane_host = "127.0.0.1";
    int32_t data_plane_port = 0;  ///< the pipeline's Gloo pairs all listen here (0 = ephemeral; orca-worker: 7200)
    /// Per data-plane operation: a backstop only. A wait for a peer that is
    /// dead or cut off ends when the engine master starts a new session.
    std::chrono::milliseconds peer_timeout{300000};
    std::chrono::milliseconds rendezvous_timeout{60000};  ///< forming a session's data plane
    std::string model_name;
  };

  /// Loads the stage's weights. The returned node is loaded but not connected.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(Options options, metrics::Registry* registry);
  ~WorkerNode() override;

  void Start();
  void Stop();

  /// A control message from upstream, in order. Forwards it downstream at once
  /// and queues it for this stage's compute. Never blocks.
  void OnControl(v1::ControlMessage msg) override;
  /// The engine master subscribes to `session`'s results (last stage only);
  /// replaces an earlier subscriber. Results of other sessions are dropped.
  absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) override;
  void Unsubscribe(const ResultSink* sink) override;
  /// HeartbeatSource: heartbeats go out from a thread of their own.
  void SubscribeHeartbeats(std::shared_ptr<HeartbeatSink> sink, absl::Duration interval) override;
  void UnsubscribeHeartbeats(const HeartbeatSink* sink) override;

  v1::WorkerInfo Info() const override;
  /// OK when loaded and the current session's peers are connected.
  absl::Status Ready() const;
  bool is_last_stage() const { return options_.engine.stage == options_.engine.num_stages - 1; }

 private:
  WorkerNode(Options options, std::unique_ptr<engine::Engine> engine, std::unique_ptr<metrics::WorkerMetrics> metrics);
  struct HeartbeatSubscriber {
    std::shared_ptr<HeartbeatSink> sink;
    absl::Duration interval;
    absl::Time next;
  };

  void ForwardLoop();
  void ComputeLoop();
  void HeartbeatLoop();
  v1::Heartbeat HeartbeatNow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BeginSession(uint64_t session);
  void StartComputing(uint64_t session);
  absl::Status RunIteration(const v1::ControlMessage& msg);
  void Publish(v1::IterationResult result);
  /// Aborts the data plane if it belongs to a session that is over (or the node is stopping).
  void AbortStaleDataPlane();
  bool IsEnded(uint64_t session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetProgress(uint64_t last_iteration_id) ABSL_LOCKS_EXCLUDED(mu_);

  Options options_;
  std::unique_ptr<engine::Engine> engine_;  // compute thread only
  std::unique_ptr<metrics::WorkerMetrics> metrics_;
  std::unique_ptr<GrpcRendezvousStore> store_;
  std::unique_ptr<v1::Worker::Stub> downstream_;
  engine::StepOutput output_;

  mutable absl::Mutex mu_;
  std::deque<v1::ControlMessage> forward_queue_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ControlMessage> compute_queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;    // session being computed
  bool connected_ ABSL_GUARDED_BY(mu_) = false;  // its data plane is up
  std::string session_error_ ABSL_GUARDED_BY(mu_);
  uint64_t subscribed_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<ResultSink> results_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::IterationResult> unsubscribed_ ABSL_GUARDED_BY(mu_);
  // The control plane's view of sessions: the newest seen, and the ones it ended.
  uint64_t latest_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> ended_sessions_ ABSL_GUARDED_BY(mu_);
  // Progress, for heartbeats (written by the compute thread).
  uint64_t last_iteration_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_iteration_time_ ABSL_GUARDED_BY(mu_);
  uint64_t waiting_iteration_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_);
  int64_t kv_slots_used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kv_local_slots_used_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<HeartbeatSubscriber> heartbeat_subscribers_ ABSL_GUARDED_BY(mu_);

  // The data plane of the session being computed. Replaced by the compute
  // thread only; other threads may Abort() it. Lock order: comm_mu_, then mu_.
  mutable absl::Mutex comm_mu_;
  std::unique_ptr<engine::PipelineChannel> pipeline_ ABSL_GUARDED_BY(comm_mu_);
  uint64_t pipeline_session_ ABSL_GUARDED_BY(comm_mu_) = 0;
  engine::PipelineChannel* compute_pipeline_ = nullptr;  // compute thread's copy of pipeline_

  std::thread forward_thread_;
  std::thread compute_thread_;
  std::thread heartbeat_thread_;
};

}  // namespace orca::worker
