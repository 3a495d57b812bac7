#pragma once
/// One pipeline stage of the distributed engine (paper §4.1, Fig. 6-8): the
/// stage's layers and tensor-parallel shards (core/engine), the control
/// plane (every control message is forwarded to the next stage BEFORE this
/// stage computes it) and the data plane (activations to and from the
/// neighbouring stages over Gloo). The last stage samples and publishes the
/// results to the engine master.
///
/// Sessions: the engine master starts a session with a control message
/// carrying a new session id; every stage then drops all request state and
/// re-forms the data plane under a rendezvous prefix naming the session, so
/// a restarted worker rejoins a clean pipeline.

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

namespace gloo::rendezvous {
class Store;
}

namespace orca::worker {

/// Receives the last stage's results (the Results stream). Must not block.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void Push(v1::IterationResult result) = 0;
};

class WorkerNode {
 public:
  struct Options {
    engine::Engine::Options engine;      ///< model, stage, num_stages, tp_size, n_slots, ...
    std::vector<std::string> workers;    ///< gRPC addresses of all stages, in order
    std::string scheduler_address;       ///< rendezvous store (needed when num_stages > 1)
    std::string deployment_id = "orca";  ///< rendezvous namespace of this engine replica
    std::string data_plane_host = "127.0.0.1";
    int32_t data_plane_port = 0;  ///< the pipeline's Gloo pairs all listen here (0 = ephemeral; orca-worker: 7200)
    std::chrono::milliseconds peer_timeout{10000};        ///< per data-plane operation
    std::chrono::milliseconds rendezvous_timeout{60000};  ///< forming a session's data plane
    std::string model_name;
  };

  /// Loads the stage's weights. The returned node is loaded but not connected.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(Options options, metrics::Registry* registry);
  ~WorkerNode();

  void Start();
  void Stop();

  /// A control message from upstream, in order. Forwards it downstream at once
  /// and queues it for this stage's compute. Never blocks.
  void OnControl(v1::ControlMessage msg);
  /// The engine master subscribes to `session`'s results (last stage only);
  /// replaces an earlier subscriber. Results of other sessions are dropped.
  absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink);
  void Unsubscribe(const ResultSink* sink);

  v1::WorkerInfo Info() const;
  /// OK when loaded and the current session's peers are connected.
  absl::Status Ready() const;
  bool is_last_stage() const { return options_.engine.stage == options_.engine.num_stages - 1; }

 private:
  WorkerNode(Options options, std::unique_ptr<engine::Engine> engine, std::unique_ptr<metrics::WorkerMetrics> metrics);
  void ForwardLoop();
  void ComputeLoop();
  absl::Status BeginSession(uint64_t session);
  absl::Status RunIteration(const v1::ControlMessage& msg);
  void Publish(v1::IterationResult result);

  Options options_;
  std::unique_ptr<engine::Engine> engine_;  // compute thread only
  std::unique_ptr<metrics::WorkerMetrics> metrics_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<engine::Communicator> pipeline_;  // compute thread only
  std::unique_ptr<v1::Worker::Stub> downstream_;
  engine::StepOutput output_;
  std::vector<float> hidden_in_;

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
  std::thread forward_thread_;
  std::thread compute_thread_;
};

}  // namespace orca::worker
