#include "services/scheduler/remote_engine_client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "services/common/channels.h"
#include "services/common/control_convert.h"

namespace orca::scheduler {
namespace {

constexpr absl::Duration kRetryBackoff = absl::Milliseconds(250);
constexpr absl::Duration kPoll = absl::Milliseconds(20);
constexpr absl::Duration kMaxHeartbeatInterval = absl::Milliseconds(500);

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

absl::StatusOr<v1::WorkerInfo> GetInfo(v1::Worker::Stub* stub, absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  v1::WorkerInfo info;
  grpc::Status s = stub->GetInfo(&ctx, v1::WorkerInfoRequest(), &info);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return info;
}

}  // namespace

struct RemoteEngineClient::Session {
  uint64_t id = 0;
  grpc::ClientContext results_ctx;
  grpc::ClientContext control_ctx;
  std::unique_ptr<grpc::ClientReader<v1::IterationResult>> results;
  std::unique_ptr<grpc::ClientWriter<v1::ControlMessage>> control;
  v1::ControlSummary summary;
  std::vector<std::unique_ptr<grpc::ClientContext>> heartbeat_ctx;  // one per stage
  std::vector<std::thread> threads;                                 // results reader, watchers, watchdog
};

absl::StatusOr<std::unique_ptr<RemoteEngineClient>> RemoteEngineClient::Create(Options options) {
  if (options.workers.empty()) return absl::InvalidArgumentError("no worker addresses");
  if (options.worker_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("--worker-timeout-ms must be positive");
  if (options.heartbeat_interval <= absl::ZeroDuration())
    options.heartbeat_interval = std::min(options.worker_timeout / 10, kMaxHeartbeatInterval);
  std::vector<std::unique_ptr<v1::Worker::Stub>> stubs;
  for (const std::string& addr : options.workers)
    stubs.push_back(v1::Worker::NewStub(services::CreateInternalChannel(addr, options.internal_auth)));
  const absl::Time start = absl::Now();
  absl::Time last_log = start;
  std::vector<v1::WorkerInfo> infos(stubs.size());
  while (true) {
    absl::Status all = absl::OkStatus();
    for (size_t i = 0; i < stubs.size() && all.ok(); ++i) {
      auto info = GetInfo(stubs[i].get(), absl::Seconds(2));
      if (!info.ok()) {
        // A fresh channel connects at once; a failed one waits out gRPC's reconnect backoff.
        stubs[i] = v1::Worker::NewStub(services::CreateInternalChannel(options.workers[i], options.internal_auth));
        all =
            absl::UnavailableError(absl::StrCat("stage ", i, " (", options.workers[i], "): ", info.status().message()));
      } else if (info->stage() != static_cast<int32_t>(i) || info->num_stages() != static_cast<int32_t>(stubs.size())) {
        return absl::FailedPreconditionError(absl::StrCat(options.workers[i], " is stage ", info->stage(), " of ",
                                                          info->num_stages(), " but is listed as stage ", i, " of ",
                                                          stubs.size()));
      } else {
        infos[i] = *info;
      }
    }
    if (all.ok()) break;
    if (options.startup_timeout > absl::ZeroDuration() && absl::Now() - start > options.startup_timeout) return all;
    if (absl::Now() - last_log > absl::Seconds(5)) {
      ORCA_LOG(INFO) << "waiting for workers: " << all.message();
      last_log = absl::Now();
    }
    absl::SleepFor(kRetryBackoff);
  }
  EngineInfo info;
  const v1::WorkerInfo& last = infos.back();
  info.model_name = options.model_name.empty() ? last.model_name() : options.model_name;
  info.vocab_size = last.vocab_size();
  info.max_context = last.max_context();
  info.eos_token_ids.assign(last.eos_token_ids().begin(), last.eos_token_ids().end());
  info.num_stages = static_cast<int32_t>(infos.size());
  info.kv_slots = last.kv_slots_total();
  info.kv_block_size = infos.front().kv_block_size();
  info.sliding_window = infos.front().sliding_window();
  for (size_t i = 0; i < infos.size(); ++i) {
    info.kv_slots = std::min<int64_t>(info.kv_slots, infos[i].kv_slots_total());
    // KV by layer type: the sliding-window layers' pool is the smallest a stage has (a
    // stage without one keeps those layers in its main pool: nothing to count there).
    const int64_t local = infos[i].kv_local_slots_total();
    if (local > 0 && (info.kv_local_slots == 0 || local < info.kv_local_slots)) info.kv_local_slots = local;
    if (infos[i].sliding_window() != info.sliding_window)
      return absl::FailedPreconditionError(absl::StrCat(
          "the stages disagree on the sliding window: stage 0 (", options.workers[0], ") reports ",
          info.sliding_window, " tokens, stage ", i, " (", options.workers[i], ") ", infos[i].sliding_window(),
          "; every stage must serve the same model"));
    if (infos[i].kv_block_size() != info.kv_block_size)
      return absl::FailedPreconditionError(
          absl::StrCat("the stages disagree on the KV block size: stage 0 (", options.workers[0], ") uses ",
                       info.kv_block_size, " tokens, stage ", i, " (", options.workers[i], ") ",
                       infos[i].kv_block_size(), "; give every worker the same --kv-block-size"));
  }
  if (options.kv_block_size > 0 && info.kv_block_size != options.kv_block_size)
    return absl::FailedPreconditionError(absl::StrCat(
        "the scheduler's --kv-block-size is ", options.kv_block_size, " but the workers' is ", info.kv_block_size,
        ": reservations would not match the workers' KV blocks; give both the same value"));
  return std::unique_ptr<RemoteEngineClient>(
      new RemoteEngineClient(std::move(options), std::move(stubs), std::move(info)));
}

RemoteEngineClient::~RemoteEngineClient() { Stop(); }

absl::Status RemoteEngineClient::Start(OutcomeCallback on_outcome, StateCallback on_state) {
  on_outcome_ = std::move(on_outcome);
  on_state_ = std::move(on_state);
  on_state_(false, "starting a pipeline session", 0);
  manager_ = std::thread([this] { Manage(); });
  return absl::OkStatus();
}

void RemoteEngineClient::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (manager_.joinable()) manager_.join();
}

bool RemoteEngineClient::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void RemoteEngineClient::Submit(sched::IterationPlan plan, uint64_t session) {
  absl::MutexLock lock(&mu_);
  // Made before the loop heard that its session ended: its requests died with
  // that session, and the next session's workers must not reserve KV for them.
  if (session != serving_session_) return;
  outgoing_.emplace_back(std::move(plan));
}

void RemoteEngineClient::Release(std::vector<sched::RequestId> ids, uint64_t session) {
  absl::MutexLock lock(&mu_);
  if (session != serving_session_) return;  // that session's workers hold nothing any more
  outgoing_.emplace_back(std::move(ids));
}

absl::Status RemoteEngineClient::AllLoaded() {
  for (size_t i = 0; i < stubs_.size(); ++i) {
    auto info = GetInfo(stubs_[i].get(), absl::Seconds(2));
    if (!info.ok()) {
      stubs_[i] = v1::Worker::NewStub(
          services::CreateInternalChannel(options_.workers[i], options_.internal_auth));  // skip the reconnect backoff
      return absl::UnavailableError(
          absl::StrCat("stage ", i, " (", options_.workers[i], ") unreachable: ", info.status().message()));
    }
    if (!info->loaded()) return absl::UnavailableError(absl::StrCat("stage ", i, " still loading"));
    // A restarted worker must still fit what the scheduler admits against.
    if (info->kv_block_size() != info_.kv_block_size)
      return absl::FailedPreconditionError(absl::StrCat("stage ", i, " (", options_.workers[i], ") uses KV blocks of ",
                                                        info->kv_block_size(), " tokens, the scheduler ",
                                                        info_.kv_block_size, ": give both the same --kv-block-size"));
    if (info->kv_slots_total() < info_.kv_slots)
      return absl::FailedPreconditionError(absl::StrCat("stage ", i, " (", options_.workers[i], ") holds ",
                                                        info->kv_slots_total(), " KV slots, fewer than the ",
                                                        info_.kv_slots, " the scheduler admits against"));
    if (info->kv_local_slots_total() > 0 &&
        (info->kv_local_slots_total() < info_.kv_local_slots || info_.kv_local_slots == 0))
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", i, " (", options_.workers[i], ") holds ", info->kv_local_slots_total(),
          " KV slots for its sliding-window layers, but the scheduler counts ",
          info_.kv_local_slots == 0 ? std::string("none (they kept every position in the main pool)")
                                    : absl::StrCat(info_.kv_local_slots),
          ": restart the scheduler, or the worker as it was (--swa-full, --kv-local-slots)"));
  }
  return absl::OkStatus();
}

void RemoteEngineClient::Manage() {
  std::mt19937_64 rng(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^ (static_cast<uint64_t>(getpid()) << 32));
  std::string last_reason;
  while (!Stopping()) {
    const uint64_t session_id = (rng() >> 1) | 1;
    absl::Status s = AllLoaded();
    if (s.ok()) s = RunSession(session_id);
    ready_ = false;
    {
      absl::MutexLock lock(&mu_);
      serving_session_ = 0;
      outgoing_.clear();
      if (stop_) break;
    }
    const std::string reason(s.message());
    if (reason != last_reason) {
      if (s.code() == absl::StatusCode::kFailedPrecondition)
        ORCA_LOG(ERROR) << "engine pipeline cannot form: " << reason;
      else
        ORCA_LOG(WARNING) << "engine pipeline not ready: " << reason;
    }
    last_reason = reason;
    on_state_(false, reason, session_id);
    absl::SleepFor(kRetryBackoff);
  }
}

void RemoteEngineClient::ReadResults(Session* session) {
  v1::IterationResult r;
  while (session->results->Read(&r)) {
    if (r.iteration_id() == 0) {
      absl::MutexLock lock(&mu_);
      if (!r.error().empty())
        broken_ = absl::StrCat("forming the data plane failed: ", r.error());
      else
        session_ready_ = true;
      continue;
    }
    IterationOutcome outcome;
    outcome.iteration_id = r.iteration_id();
    if (!r.error().empty())  // a stage failed it (its peer or data plane): the pipeline re-forms, a retry may work
      outcome.status = absl::UnavailableError(r.error());
    else
      outcome.results = services::ProtoToResults(r);
    for (const auto& t : r.stage_timings())
      outcome.stage_timings.push_back({t.stage(), t.compute_micros(), t.comm_micros()});
    on_outcome_(std::move(outcome));
  }
  grpc::Status status = session->results->Finish();
  absl::MutexLock lock(&mu_);
  if (broken_.empty() && !session_over_)
    broken_ = absl::StrCat("results stream from the last stage (", options_.workers.back(),
                           ") ended: ", status.ok() ? "closed" : status.error_message());
}

void RemoteEngineClient::WatchStage(Session* session, size_t stage) {
  v1::HeartbeatRequest request;
  request.set_interval_millis(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.heartbeat_interval)));
  auto reader = stubs_[stage]->Heartbeats(session->heartbeat_ctx[stage].get(), request);
  v1::Heartbeat hb;
  while (reader->Read(&hb)) {
    absl::MutexLock lock(&mu_);
    StageLiveness& st = stages_[stage];
    st.last_heard = absl::Now();
    if (hb.session_id() == session->id) {
      st.joined = true;
      st.connected |= hb.connected();
    } else if (st.joined && broken_.empty()) {
      broken_ = absl::StrCat("stage ", stage, " (", options_.workers[stage], ") ",
                             hb.session_id() == 0 ? "restarted" : "left the session");
    }
    st.last = std::move(hb);
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  if (broken_.empty() && !session_over_)
    broken_ = absl::StrCat("heartbeats from stage ", stage, " (", options_.workers[stage],
                           ") ended: ", status.ok() ? "closed" : status.error_message());
}

absl::Status RemoteEngineClient::CheckLiveness(uint64_t session_id, absl::Time now) {
  const absl::Duration timeout = options_.worker_timeout;
  // When this process was the one stopped (SIGSTOP, swapped out), the silence
  // was ours: the workers' heartbeats are queued behind it. Count afresh.
  if (now - last_check_ > std::min(timeout / 2, absl::Seconds(1))) {
    for (StageLiveness& st : stages_) st.last_heard = now;
  }
  last_check_ = now;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const absl::Duration silent = now - stages_[i].last_heard;
    if (silent > timeout)
      return absl::UnavailableError(absl::StrCat("stage ", i, " (", options_.workers[i], ") sent no heartbeat for ",
                                                 absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(10))),
                                                 " (--worker-timeout-ms ", absl::ToInt64Milliseconds(timeout),
                                                 "): dead, stopped or cut off"));
  }
  for (size_t i = 1; i < stages_.size(); ++i) {
    const v1::Heartbeat& hb = stages_[i].last;
    const v1::Heartbeat& up = stages_[i - 1].last;
    // How long stage i has waited since stage i-1 computed what it waits for.
    const int64_t stuck = std::min(hb.waiting_micros(), up.last_iteration_age_micros());
    if (hb.session_id() == session_id && up.session_id() == session_id && hb.waiting_iteration_id() != 0 &&
        up.last_iteration_id() >= hb.waiting_iteration_id() && stuck > absl::ToInt64Microseconds(timeout))
      return absl::UnavailableError(absl::StrCat(
          "stage ", i, " has waited ", stuck / 1000, " ms for the activations of iteration ", hb.waiting_iteration_id(),
          " since stage ", i - 1, " computed them: the data plane between them is cut"));
  }
  if (session_ready_) {
    for (size_t i = 0; i < stages_.size(); ++i) {
      const v1::Heartbeat& hb = stages_[i].last;
      if (stages_[i].connected && hb.session_id() == session_id && !hb.connected())
        return absl::UnavailableError(
            absl::StrCat("stage ", i, " (", options_.workers[i], ") lost its data plane: ", hb.status_message()));
    }
  }
  return absl::OkStatus();
}

// Watches the session's liveness every few ms; on failure it records why and
// cancels the control stream, so a write blocked on a dead peer returns.
void RemoteEngineClient::Watchdog(Session* session) {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](RemoteEngineClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                                 return c->stop_ || c->session_over_ || !c->broken_.empty();
                               },
                               this),
                           kPoll);
      if (stop_ || session_over_) return;
      if (broken_.empty()) {
        absl::Status s = CheckLiveness(session->id, absl::Now());
        if (!s.ok()) broken_ = std::string(s.message());
      }
      if (broken_.empty()) continue;
    }
    session->control_ctx.TryCancel();
    return;
  }
}

void RemoteEngineClient::OpenStreams(Session* session) {
  v1::ResultsRequest rr;
  rr.set_session_id(session->id);
  session->results = stubs_.back()->Results(&session->results_ctx, rr);
  session->threads.emplace_back([this, session] { ReadResults(session); });
  // Every context before the first watcher starts: a watcher reads heartbeat_ctx[i] while
  // this thread would otherwise still be growing (and reallocating) the vector.
  for (size_t i = 0; i < stubs_.size(); ++i) session->heartbeat_ctx.push_back(std::make_unique<grpc::ClientContext>());
  for (size_t i = 0; i < stubs_.size(); ++i) {
    session->threads.emplace_back([this, session, i] { WatchStage(session, i); });
  }
  session->threads.emplace_back([this, session] { Watchdog(session); });
  session->control = stubs_.front()->Control(&session->control_ctx, &session->summary);
}

// Starts the session and waits until every stage has connected its peers (the
// last stage answers iteration 0), a stage fails, or the session timeout.
absl::Status RemoteEngineClient::AwaitConnected(Session* session) {
  v1::ControlMessage hello;
  hello.set_session_id(session->id);
  if (!session->control->Write(hello)) {
    absl::MutexLock lock(&mu_);
    return absl::UnavailableError(broken_.empty() ? "cannot open the control stream to stage 0" : broken_);
  }
  const absl::Time deadline = absl::Now() + options_.session_timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stop_) return absl::CancelledError("stopping");
    if (!broken_.empty()) return absl::UnavailableError(broken_);
    if (session_ready_) break;
    if (absl::Now() > deadline) return absl::DeadlineExceededError("the pipeline did not connect in time");
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](RemoteEngineClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                               return c->stop_ || c->session_ready_ || !c->broken_.empty();
                             },
                             this),
                         kPoll);
  }
  serving_session_ = session->id;
  outgoing_.clear();
  return absl::OkStatus();
}

absl::Status RemoteEngineClient::Serve(Session* session) {
  ready_ = true;
  on_state_(true, "", session->id);
  ORCA_LOG(INFO) << "pipeline session " << session->id << " ready (" << stubs_.size() << " stages)";
  while (true) {
    std::deque<Outgoing> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](RemoteEngineClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                                 return c->stop_ || !c->outgoing_.empty() || !c->broken_.empty();
                               },
                               this),
                           kPoll);
      if (stop_) return absl::CancelledError("stopping");
      if (!broken_.empty()) return absl::UnavailableError(broken_);
      batch.swap(outgoing_);
    }
    for (Outgoing& o : batch) {
      v1::ControlMessage msg;
      msg.set_session_id(session->id);
      msg.set_sent_unix_micros(absl::ToUnixMicros(absl::Now()));
      if (auto* plan = std::get_if<sched::IterationPlan>(&o)) {
        services::PlanToControlMessage(*plan, &msg);
      } else {
        for (sched::RequestId id : std::get<std::vector<sched::RequestId>>(o)) msg.add_released_request_ids(id);
      }
      if (!session->control->Write(msg)) {
        absl::MutexLock lock(&mu_);
        return absl::UnavailableError(
            broken_.empty() ? absl::StrCat("control stream to stage 0 (", options_.workers.front(), ") broke")
                            : broken_);
      }
    }
  }
}

absl::Status RemoteEngineClient::RunSession(uint64_t session_id) {
  {
    absl::MutexLock lock(&mu_);
    broken_.clear();
    session_ready_ = false;
    session_over_ = false;
    const absl::Time now = absl::Now();
    stages_.assign(stubs_.size(), StageLiveness{now, v1::Heartbeat(), false, false});
    last_check_ = now;
  }
  Session session;
  session.id = session_id;
  OpenStreams(&session);
  absl::Status s = AwaitConnected(&session);
  if (s.ok()) s = Serve(&session);
  // Teardown. The threads take mu_: never join them under the lock.
  {
    absl::MutexLock lock(&mu_);
    session_over_ = true;
    serving_session_ = 0;
  }
  session.control_ctx.TryCancel();
  session.results_ctx.TryCancel();
  for (auto& ctx : session.heartbeat_ctx) ctx->TryCancel();
  for (std::thread& t : session.threads) t.join();
  return s;
}

}  // namespace orca::scheduler
