#include "services/worker/worker_node.h"

#include <gloo/rendezvous/store.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "core/engine/gloo_communicator.h"
#include "services/common/channels.h"
#include "services/common/control_convert.h"
#include "services/worker/grpc_rendezvous_store.h"

namespace orca::worker {
namespace {

using Clock = std::chrono::steady_clock;
int64_t Micros(Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

// Sent before every iteration's activations: whether the sending stage
// succeeded, how many floats follow, and why it failed otherwise.
struct FrameHeader {
  int64_t status = 0;  // 0 = ok
  int64_t count = 0;
  char error[240] = {};
};
static_assert(sizeof(FrameHeader) == 256);

// Results held for a session nobody has subscribed to yet (the session-ready answer races the subscription).
constexpr size_t kMaxUnsubscribedResults = 1024;

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
        services::CreateInternalChannel(node->options_.scheduler_address), node->options_.rendezvous_timeout);
  }
  if (stage + 1 < P) {
    node->downstream_ = v1::Worker::NewStub(services::CreateInternalChannel(node->options_.workers[stage + 1]));
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
}

void WorkerNode::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (forward_thread_.joinable()) forward_thread_.join();
  if (compute_thread_.joinable()) compute_thread_.join();
}

void WorkerNode::OnControl(v1::ControlMessage msg) {
  absl::MutexLock lock(&mu_);
  // The control plane runs ahead of compute (paper §4.1): the next stage sees
  // this message while we are still busy with earlier iterations.
  if (downstream_) forward_queue_.push_back(msg);
  compute_queue_.push_back(std::move(msg));
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
        downstream_ = v1::Worker::NewStub(services::CreateInternalChannel(options_.workers[next]));
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
  pipeline_.reset();
  if (options_.engine.num_stages == 1) return absl::OkStatus();
  engine::GlooCommunicator::Options o;
  o.store = store_.get();
  o.prefix = absl::StrCat(options_.deployment_id, "/pipeline/session-", session);
  o.rank = options_.engine.stage;
  o.size = options_.engine.num_stages;
  o.hostname = options_.data_plane_host;
  o.port = options_.data_plane_port;
  o.timeout = options_.rendezvous_timeout;
  o.op_timeout = options_.peer_timeout;
  ORCA_ASSIGN_OR_RETURN(pipeline_, engine::GlooCommunicator::Create(o));
  return absl::OkStatus();
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
    }
    if (msg.session_id() != current) {
      current = msg.session_id();
      {
        absl::MutexLock lock(&mu_);
        session_ = current;
        connected_ = false;
        unsubscribed_.clear();
      }
      ORCA_LOG(INFO) << "stage " << options_.engine.stage << ": starting session " << current;
      absl::Status s = BeginSession(current);
      {
        absl::MutexLock lock(&mu_);
        connected_ = s.ok();
        session_error_ = s.ok() ? "" : std::string(s.message());
      }
      if (!s.ok())
        ORCA_LOG(ERROR) << "session " << current << ": " << s;
      else
        ORCA_LOG(INFO) << "stage " << options_.engine.stage << ": session " << current << " connected";
      if (is_last_stage()) {
        v1::IterationResult ready;
        ready.set_iteration_id(0);
        if (!s.ok()) ready.set_error(std::string(s.message()));
        Publish(std::move(ready));
      }
    }
    if (msg.requests_size() == 0) {  // release-only (or the session's first message)
      for (uint64_t id : msg.released_request_ids()) engine_->Release(id);
      continue;
    }
    bool connected;
    {
      absl::MutexLock lock(&mu_);
      connected = connected_;
    }
    absl::Status s = connected ? RunIteration(msg) : absl::UnavailableError("this stage's data plane is down");
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
  const int32_t stage = options_.engine.stage;
  const bool first = stage == 0, last = is_last_stage();
  engine::StepInput in = services::ControlMessageToStepInput(msg);
  int64_t tokens = 0;
  for (const engine::StepSequence& s : in.seqs) tokens += static_cast<int64_t>(s.token_ids.size());
  const int64_t count = tokens * engine_->config().hidden_size;
  int64_t comm_us = 0;
  absl::Status upstream = absl::OkStatus();
  if (!first) {
    const auto t0 = Clock::now();
    FrameHeader h;
    absl::Status s = pipeline_->Recv(stage - 1, &h, sizeof(h));
    if (s.ok() && h.status == 0) {
      if (h.count != count) {
        s = absl::DataLossError(absl::StrCat("stage ", stage - 1, " sent ", h.count, " values, expected ", count));
      } else {
        hidden_in_.resize(static_cast<size_t>(count));
        s = pipeline_->Recv(stage - 1, hidden_in_.data(), sizeof(float) * count);
      }
    } else if (s.ok()) {
      h.error[sizeof(h.error) - 1] = 0;
      upstream = absl::AbortedError(h.error);
    }
    comm_us += Micros(Clock::now() - t0);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      connected_ = false;
      session_error_ = std::string(s.message());
      return s;
    }
  }
  absl::Status status = upstream;
  const auto c0 = Clock::now();
  if (status.ok()) {
    status = engine_->Step(in, first ? nullptr : hidden_in_.data(), &output_);
  } else {
    for (uint64_t id : in.released_ids) engine_->Release(id);
  }
  const int64_t compute_us = Micros(Clock::now() - c0) - output_.timings.comm_micros;
  comm_us += output_.timings.comm_micros;
  if (!last) {
    const auto t0 = Clock::now();
    FrameHeader h;
    h.status = status.ok() ? 0 : 1;
    h.count = status.ok() ? count : 0;
    if (!status.ok()) std::strncpy(h.error, std::string(status.message()).c_str(), sizeof(h.error) - 1);
    absl::Status s = pipeline_->Send(stage + 1, &h, sizeof(h));
    if (s.ok() && status.ok()) s = pipeline_->Send(stage + 1, output_.hidden.data(), sizeof(float) * count);
    comm_us += Micros(Clock::now() - t0);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      connected_ = false;
      session_error_ = std::string(s.message());
      return s;
    }
  }
  metrics_->stage_compute_seconds().Observe(compute_us / 1e6);
  metrics_->stage_communication_seconds().Observe(comm_us / 1e6);
  if (!status.ok()) return status;
  if (last) {
    v1::IterationResult r;
    r.set_iteration_id(msg.iteration_id());
    services::SamplesToProto(output_.samples, &r);
    v1::StageTiming* t = r.add_stage_timings();
    t->set_stage(stage);
    t->set_compute_micros(compute_us);
    t->set_comm_micros(comm_us);
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
  for (int32_t id : c.eos_token_ids) info.add_eos_token_ids(id);
  absl::MutexLock lock(&mu_);
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
