#include "services/worker/worker_node.h"

#include <gloo/rendezvous/store.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "core/engine/pipeline_channel.h"
#include "services/common/channels.h"
#include "services/common/control_convert.h"
#include "services/worker/grpc_rendezvous_store.h"

namespace orca::worker {
namespace {

// Results held for a session nobody has subscribed to yet (the session-ready answer races the subscription).
constexpr size_t kMaxUnsubscribedResults = 1024;
// Sessions remembered as over, so their late messages are dropped.
constexpr size_t kMaxEndedSessions = 64;
// The heartbeat thread's tick; subscribers' intervals are at least this.
constexpr absl::Duration kHeartbeatTick = absl::Milliseconds(10);

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Create(Options options, metrics::Registry* registry) {
  const int32_t P = options.engine.num_stages, stage = options.engine.stage;
  if (P > 1 && static_cast<int32_t>(options.workers.size()) != P)
    return absl::InvalidArgumentError(
        absl::StrCat("--workers lists ", options.workers.size(), " addresses but there are ", P, " stages"));
  if (P > 1 && options.scheduler_address.empty())
    return absl::InvalidArgumentError("a multi-stage pipeline needs --scheduler (the data-plane rendezvous store)");
  ORCA_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(options.engine));
  ORCA_ASSIGN_OR_RETURN(auto metrics, metrics::WorkerMetrics::Create(registry, options.model_name, stage));
  std::unique_ptr<WorkerNode> node(new WorkerNode(std::move(options), std::move(engine), std::move(metrics)));
  if (P > 1) {
    node->store_ = std::make_unique<GrpcRendezvousStore>(
        services::CreateInternalChannel(node->options_.scheduler_address, node->options_.internal_auth),
        node->options_.rendezvous_timeout);
  }
  if (stage + 1 < P) {
    node->downstream_ = v1::Worker::NewStub(
        services::CreateInternalChannel(node->options_.workers[stage + 1], node->options_.internal_auth));
  }
  return node;
}

WorkerNode::WorkerNode(Options options, std::unique_ptr<engine::Engine> engine,
                       std::unique_ptr<metrics::WorkerMetrics> metrics)
    : options_(std::move(options)), engine_(std::move(engine)), metrics_(std::move(metrics)) {}

WorkerNode::~WorkerNode() { Stop(); }

void WorkerNode::Start() {
  if (downstream_) forward_thread_ = std::thread([this] { ForwardLoop(); });
  compute_thread_ = std::thread([this] { ComputeLoop(); });
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void WorkerNode::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  AbortStaleDataPlane();  // a compute thread waiting on a peer must not hold up the exit
  if (forward_thread_.joinable()) forward_thread_.join();
  if (compute_thread_.joinable()) compute_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  absl::MutexLock lock(&mu_);
  heartbeat_subscribers_.clear();
}

void WorkerNode::OnControl(v1::ControlMessage msg) {
  bool new_session = false;
  {
    absl::MutexLock lock(&mu_);
    const uint64_t session = msg.session_id();
    if (IsEnded(session)) return;  // a late message of a session that is over
    if (session != latest_session_) {
      // A new session ends the old one: nothing waits for its work any more.
      if (latest_session_ != 0) ended_sessions_.push_back(latest_session_);
      if (ended_sessions_.size() > kMaxEndedSessions) ended_sessions_.pop_front();
      latest_session_ = session;
      auto stale = [session](const v1::ControlMessage& m) { return m.session_id() != session; };
      compute_queue_.erase(std::remove_if(compute_queue_.begin(), compute_queue_.end(), stale), compute_queue_.end());
      forward_queue_.erase(std::remove_if(forward_queue_.begin(), forward_queue_.end(), stale), forward_queue_.end());
      new_session = true;
    }
    // The control plane runs ahead of compute (paper §4.1): the next stage sees
    // this message while we are still busy with earlier iterations.
    if (downstream_) forward_queue_.push_back(msg);
    compute_queue_.push_back(std::move(msg));
  }
  if (new_session) AbortStaleDataPlane();
}

bool WorkerNode::IsEnded(uint64_t session) const {
  return std::find(ended_sessions_.begin(), ended_sessions_.end(), session) != ended_sessions_.end();
}

void WorkerNode::AbortStaleDataPlane() {
  absl::MutexLock lock(&comm_mu_);
  if (pipeline_ == nullptr) return;
  bool stale;
  {
    absl::MutexLock state(&mu_);
    stale = stop_ || latest_session_ != pipeline_session_;
  }
  if (stale) pipeline_->Abort();
}

absl::Status WorkerNode::SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) {
  if (!is_last_stage()) return absl::FailedPreconditionError("results are served by the last pipeline stage");
  absl::MutexLock lock(&mu_);
  subscribed_session_ = session;
  results_ = std::move(sink);
  if (session == session_) {
    for (auto& r : unsubscribed_) results_->Push(std::move(r));
  }
  unsubscribed_.clear();
  return absl::OkStatus();
}

void WorkerNode::Unsubscribe(const ResultSink* sink) {
  absl::MutexLock lock(&mu_);
  if (results_.get() == sink) results_.reset();
}

void WorkerNode::SubscribeHeartbeats(std::shared_ptr<HeartbeatSink> sink, absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  heartbeat_subscribers_.push_back({std::move(sink), std::max(interval, kHeartbeatTick), absl::InfinitePast()});
}

void WorkerNode::UnsubscribeHeartbeats(const HeartbeatSink* sink) {
  absl::MutexLock lock(&mu_);
  auto& subs = heartbeat_subscribers_;
  subs.erase(std::remove_if(subs.begin(), subs.end(), [sink](const auto& s) { return s.sink.get() == sink; }),
             subs.end());
}

v1::Heartbeat WorkerNode::HeartbeatNow() const {
  v1::Heartbeat hb;
  hb.set_stage(options_.engine.stage);
  hb.set_session_id(session_);
  hb.set_connected(connected_);
  if (!connected_) hb.set_status_message(session_ == 0 ? "waiting for the engine master's session" : session_error_);
  hb.set_last_iteration_id(last_iteration_id_);
  if (last_iteration_id_ != 0)
    hb.set_last_iteration_age_micros(absl::ToInt64Microseconds(absl::Now() - last_iteration_time_));
  hb.set_waiting_iteration_id(waiting_iteration_id_);
  if (waiting_iteration_id_ != 0) hb.set_waiting_micros(absl::ToInt64Microseconds(absl::Now() - waiting_since_));
  hb.set_kv_slots_used(kv_slots_used_);
  hb.set_sent_unix_micros(absl::ToUnixMicros(absl::Now()));
  return hb;
}

// A thread of its own: heartbeats go out while the compute thread is busy
// for as long as an iteration takes, and stop only when the process stops.
void WorkerNode::HeartbeatLoop() {
  while (true) {
    std::vector<std::shared_ptr<HeartbeatSink>> due;
    v1::Heartbeat hb;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), kHeartbeatTick);
      if (stop_) return;
      const absl::Time now = absl::Now();
      for (HeartbeatSubscriber& s : heartbeat_subscribers_) {
        if (now < s.next) continue;
        s.next = now + s.interval;
        due.push_back(s.sink);
      }
      if (!due.empty()) hb = HeartbeatNow();
    }
    // Outside the lock: a sink's stream may end here and unsubscribe.
    for (auto& sink : due) sink->Push(hb);
  }
}

void WorkerNode::SetProgress(uint64_t last_iteration_id) {
  const int64_t used = engine_->kv_slots_used(), local_used = engine_->kv_local_slots_used();
  absl::MutexLock lock(&mu_);
  if (last_iteration_id != 0 && last_iteration_id != last_iteration_id_) {
    last_iteration_id_ = last_iteration_id;
    last_iteration_time_ = absl::Now();
  }
  kv_slots_used_ = used;
  kv_local_slots_used_ = local_used;
}

void WorkerNode::ForwardLoop() {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientWriter<v1::ControlMessage>> writer;
  v1::ControlSummary summary;
  uint64_t stream_session = 0;
  const int32_t next = options_.engine.stage + 1;
  while (true) {
    v1::ControlMessage msg;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerNode* n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(n->mu_) { return n->stop_ || !n->forward_queue_.empty(); },
          this));
      if (stop_) break;
      msg = std::move(forward_queue_.front());
      forward_queue_.pop_front();
    }
    if (!writer || msg.session_id() != stream_session) {
      if (ctx) ctx->TryCancel();
      if (writer) {
        writer.reset();
      } else if (stream_session != 0) {
        // The last stream broke: a fresh channel skips gRPC's reconnect backoff.
        downstream_ =
            v1::Worker::NewStub(services::CreateInternalChannel(options_.workers[next], options_.internal_auth));
      }
      ctx = std::make_unique<grpc::ClientContext>();
      writer = downstream_->Control(ctx.get(), &summary);
      stream_session = msg.session_id();
    }
    if (!writer->Write(msg)) {
      ORCA_LOG(WARNING) << "control stream to stage " << next << " (" << options_.workers[next] << ") broke; session "
                        << stream_session << " is lost";
      writer.reset();
    }
  }
  if (ctx) ctx->TryCancel();
}

absl::Status WorkerNode::BeginSession(uint64_t session) {
  engine_->ReleaseAll();
  SetProgress(0);
  {
    absl::MutexLock lock(&comm_mu_);  // AbortStaleDataPlane may be using it
    pipeline_.reset();
    pipeline_session_ = 0;
  }
  compute_pipeline_ = nullptr;
  if (options_.engine.num_stages == 1) return absl::OkStatus();
  // A rendezvous for a session that is already over is abandoned at once.
  store_->SetCancelled([this, session] {
    absl::MutexLock lock(&mu_);
    return stop_ || latest_session_ != session;
  });
  engine::PipelineChannel::Options o;
  o.store = store_.get();
  o.prefix = absl::StrCat(options_.deployment_id, "/pipeline/session-", session);
  o.stage = options_.engine.stage;
  o.num_stages = options_.engine.num_stages;
  o.hostname = options_.data_plane_host;
  o.port = options_.data_plane_port;
  o.timeout = options_.rendezvous_timeout;
  o.op_timeout = options_.peer_timeout;
  o.engine = engine_.get();
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<engine::PipelineChannel> pipeline, engine::PipelineChannel::Create(o));
  compute_pipeline_ = pipeline.get();
  {
    absl::MutexLock lock(&comm_mu_);
    pipeline_ = std::move(pipeline);
    pipeline_session_ = session;
  }
  AbortStaleDataPlane();  // a newer session may have begun while this one connected
  return absl::OkStatus();
}

void WorkerNode::StartComputing(uint64_t session) {
  {
    absl::MutexLock lock(&mu_);
    session_ = session;
    connected_ = false;
    session_error_.clear();
    unsubscribed_.clear();
    waiting_iteration_id_ = 0;
  }
  ORCA_LOG(INFO) << "stage " << options_.engine.stage << ": starting session " << session;
  absl::Status s = BeginSession(session);
  {
    absl::MutexLock lock(&mu_);
    connected_ = s.ok();
    session_error_ = s.ok() ? "" : std::string(s.message());
  }
  if (!s.ok())
    ORCA_LOG(ERROR) << "session " << session << ": " << s;
  else
    ORCA_LOG(INFO) << "stage " << options_.engine.stage << ": session " << session << " connected";
  if (is_last_stage()) {
    v1::IterationResult ready;
    ready.set_iteration_id(0);
    if (!s.ok()) ready.set_error(std::string(s.message()));
    Publish(std::move(ready));
  }
}

void WorkerNode::ComputeLoop() {
  uint64_t current = 0;
  while (true) {
    v1::ControlMessage msg;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerNode* n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(n->mu_) { return n->stop_ || !n->compute_queue_.empty(); },
          this));
      if (stop_) return;
      msg = std::move(compute_queue_.front());
      compute_queue_.pop_front();
      if (IsEnded(msg.session_id())) continue;  // ended while queued
    }
    if (msg.session_id() != current) {
      current = msg.session_id();
      StartComputing(current);
    }
    if (msg.requests_size() == 0) {  // release-only (or the session's first message)
      for (uint64_t id : msg.released_request_ids()) engine_->Release(id);
      SetProgress(0);
      continue;
    }
    bool connected;
    {
      absl::MutexLock lock(&mu_);
      connected = connected_;
    }
    absl::Status s = connected ? RunIteration(msg) : absl::UnavailableError("this stage's data plane is down");
    SetProgress(msg.iteration_id());
    if (!s.ok()) {
      ORCA_LOG(ERROR).With("iteration_id", msg.iteration_id()) << "stage " << options_.engine.stage << ": " << s;
      if (is_last_stage()) {
        v1::IterationResult r;
        r.set_iteration_id(msg.iteration_id());
        r.set_error(absl::StrCat("stage ", options_.engine.stage, ": ", s.message()));
        Publish(std::move(r));
      }
    }
  }
}

absl::Status WorkerNode::RunIteration(const v1::ControlMessage& msg) {
  const engine::StepInput in = services::ControlMessageToStepInput(msg);
  engine::StageHooks hooks;
  hooks.waiting = [&] {
    absl::MutexLock lock(&mu_);
    waiting_iteration_id_ = msg.iteration_id();
    waiting_since_ = absl::Now();
  };
  hooks.received = [&] {
    absl::MutexLock lock(&mu_);
    waiting_iteration_id_ = 0;
  };
  // Computed: from here on the next stage only waits for the wire.
  hooks.computed = [&] { SetProgress(msg.iteration_id()); };
  const engine::StageIteration it = engine::RunStageIteration(*engine_, compute_pipeline_, in, &output_, hooks);
  if (!it.data_plane.ok()) {
    absl::MutexLock lock(&mu_);
    connected_ = false;
    session_error_ = std::string(it.data_plane.message());
    return it.data_plane;
  }
  metrics_->stage_compute_seconds().Observe(it.compute_micros / 1e6);
  metrics_->stage_communication_seconds().Observe(it.comm_micros / 1e6);
  if (!it.status.ok()) return it.status;
  if (is_last_stage()) {
    v1::IterationResult r;
    r.set_iteration_id(msg.iteration_id());
    services::SamplesToProto(output_.samples, &r);
    services::PromptLogprobsToProto(output_.prompt_logprobs, &r);
    services::FailuresToProto(output_.failures, &r);
    v1::StageTiming* t = r.add_stage_timings();
    t->set_stage(options_.engine.stage);
    t->set_compute_micros(it.compute_micros);
    t->set_comm_micros(it.comm_micros);
    Publish(std::move(r));
  }
  return absl::OkStatus();
}

void WorkerNode::Publish(v1::IterationResult result) {
  // Under the lock so a concurrent subscription cannot reorder results (Push never blocks).
  absl::MutexLock lock(&mu_);
  if (results_ && subscribed_session_ == session_) {
    results_->Push(std::move(result));
  } else if (unsubscribed_.size() < kMaxUnsubscribedResults) {
    unsubscribed_.push_back(std::move(result));  // the master's subscription is on its way
  }
}

v1::WorkerInfo WorkerNode::Info() const {
  v1::WorkerInfo info;
  const engine::ModelConfig& c = engine_->config();
  const engine::Partition& p = engine_->partition();
  info.set_stage(options_.engine.stage);
  info.set_num_stages(options_.engine.num_stages);
  info.set_tp_rank(0);
  info.set_tp_size(options_.engine.tp_size);
  info.set_layer_begin(p.layer_begin);
  info.set_layer_end(p.layer_end);
  info.set_model_name(options_.model_name);
  info.set_vocab_size(c.vocab_size);
  info.set_max_context(c.max_position);
  info.set_kv_slots_total(engine_->kv_slots_total());
  info.set_loaded(true);
  info.set_kv_block_size(options_.engine.kv_block_size);
  info.set_sliding_window(engine_->sliding_window());
  info.set_kv_local_slots_total(engine_->kv_local_slots_total());
  for (int32_t id : c.eos_token_ids) info.add_eos_token_ids(id);
  absl::MutexLock lock(&mu_);
  info.set_kv_slots_used(kv_slots_used_);
  info.set_kv_local_slots_used(kv_local_slots_used_);
  info.set_session_id(session_);
  info.set_ready(connected_);
  info.set_status_message(
      connected_ ? "ready" : (session_ == 0 ? "loaded; waiting for the engine master's session" : session_error_));
  return info;
}

absl::Status WorkerNode::Ready() const {
  absl::MutexLock lock(&mu_);
  if (connected_) return absl::OkStatus();
  if (session_ == 0) return absl::UnavailableError("loaded; waiting for the engine master to start a session");
  return absl::UnavailableError(
      absl::StrCat("session ", session_, ": ", session_error_.empty() ? "connecting peers" : session_error_));
}

}  // namespace orca::worker
