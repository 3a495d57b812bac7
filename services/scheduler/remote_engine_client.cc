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

constexpr absl::Duration kRetryBackoff = absl::Milliseconds(500);
constexpr absl::Duration kPoll = absl::Milliseconds(20);

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
  std::thread reader;
};

absl::StatusOr<std::unique_ptr<RemoteEngineClient>> RemoteEngineClient::Create(Options options) {
  if (options.workers.empty()) return absl::InvalidArgumentError("no worker addresses");
  std::vector<std::unique_ptr<v1::Worker::Stub>> stubs;
  for (const std::string& addr : options.workers)
    stubs.push_back(v1::Worker::NewStub(services::CreateInternalChannel(addr)));
  const absl::Time start = absl::Now();
  absl::Time last_log = start;
  std::vector<v1::WorkerInfo> infos(stubs.size());
  while (true) {
    absl::Status all = absl::OkStatus();
    for (size_t i = 0; i < stubs.size() && all.ok(); ++i) {
      auto info = GetInfo(stubs[i].get(), absl::Seconds(2));
      if (!info.ok()) {
        // A fresh channel connects at once; a failed one waits out gRPC's reconnect backoff.
        stubs[i] = v1::Worker::NewStub(services::CreateInternalChannel(options.workers[i]));
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
  for (const auto& i : infos) info.kv_slots = std::min<int64_t>(info.kv_slots, i.kv_slots_total());
  return std::unique_ptr<RemoteEngineClient>(
      new RemoteEngineClient(std::move(options), std::move(stubs), std::move(info)));
}

RemoteEngineClient::~RemoteEngineClient() { Stop(); }

absl::Status RemoteEngineClient::Start(OutcomeCallback on_outcome, StateCallback on_state) {
  on_outcome_ = std::move(on_outcome);
  on_state_ = std::move(on_state);
  on_state_(false, "starting a pipeline session");
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

void RemoteEngineClient::Submit(sched::IterationPlan plan) {
  absl::MutexLock lock(&mu_);
  outgoing_.emplace_back(std::move(plan));
}

void RemoteEngineClient::Release(std::vector<sched::RequestId> ids) {
  absl::MutexLock lock(&mu_);
  outgoing_.emplace_back(std::move(ids));
}

absl::Status RemoteEngineClient::AllLoaded() {
  for (size_t i = 0; i < stubs_.size(); ++i) {
    auto info = GetInfo(stubs_[i].get(), absl::Seconds(2));
    if (!info.ok()) {
      stubs_[i] =
          v1::Worker::NewStub(services::CreateInternalChannel(options_.workers[i]));  // skip the reconnect backoff
      return absl::UnavailableError(
          absl::StrCat("stage ", i, " (", options_.workers[i], ") unreachable: ", info.status().message()));
    }
    if (!info->loaded()) return absl::UnavailableError(absl::StrCat("stage ", i, " still loading"));
  }
  return absl::OkStatus();
}

absl::Status RemoteEngineClient::Probe(uint64_t session_id) {
  for (size_t i = 0; i < stubs_.size(); ++i) {
    auto info = GetInfo(stubs_[i].get(), std::max(options_.probe_interval, absl::Seconds(1)));
    if (!info.ok())
      return absl::UnavailableError(
          absl::StrCat("stage ", i, " (", options_.workers[i], ") unreachable: ", info.status().message()));
    if (info->session_id() != session_id && info->session_id() != 0)
      return absl::UnavailableError(absl::StrCat("stage ", i, " joined another session"));
    if (info->session_id() == 0)
      return absl::UnavailableError(absl::StrCat("stage ", i, " (", options_.workers[i], ") restarted"));
  }
  return absl::OkStatus();
}

void RemoteEngineClient::Manage() {
  std::mt19937_64 rng(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^ (static_cast<uint64_t>(getpid()) << 32));
  std::string last_reason;
  while (!Stopping()) {
    absl::Status s = AllLoaded();
    if (s.ok()) s = RunSession((rng() >> 1) | 1);
    ready_ = false;
    {
      absl::MutexLock lock(&mu_);
      outgoing_.clear();
      outstanding_.clear();
      if (stop_) break;
    }
    const std::string reason(s.message());
    if (reason != last_reason) ORCA_LOG(WARNING) << "engine pipeline not ready: " << reason;
    last_reason = reason;
    on_state_(false, reason);
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
    if (!r.error().empty())
      outcome.status = absl::InternalError(r.error());
    else
      outcome.results = services::ProtoToResults(r);
    for (const auto& t : r.stage_timings())
      outcome.stage_timings.push_back({t.stage(), t.compute_micros(), t.comm_micros()});
    {
      absl::MutexLock lock(&mu_);
      outstanding_.erase(r.iteration_id());
    }
    on_outcome_(std::move(outcome));
  }
  grpc::Status status = session->results->Finish();
  absl::MutexLock lock(&mu_);
  if (broken_.empty())
    broken_ = absl::StrCat("results stream from the last stage (", options_.workers.back(),
                           ") ended: ", status.ok() ? "closed" : status.error_message());
}

absl::Status RemoteEngineClient::RunSession(uint64_t session_id) {
  {
    absl::MutexLock lock(&mu_);
    broken_.clear();
    session_ready_ = false;
  }
  Session session;
  session.id = session_id;
  v1::ResultsRequest rr;
  rr.set_session_id(session_id);
  session.results = stubs_.back()->Results(&session.results_ctx, rr);
  session.reader = std::thread([this, &session] { ReadResults(&session); });
  session.control = stubs_.front()->Control(&session.control_ctx, &session.summary);
  auto teardown = [&](absl::Status s) {
    session.control_ctx.TryCancel();
    session.results_ctx.TryCancel();
    if (session.reader.joinable()) session.reader.join();
    return s;
  };
  v1::ControlMessage hello;
  hello.set_session_id(session_id);
  if (!session.control->Write(hello))
    return teardown(absl::UnavailableError("cannot open the control stream to stage 0"));
  // Teardown joins the reader, which takes mu_: never call it under the lock.
  if (absl::Status s = AwaitSessionReady(absl::Now() + options_.session_timeout); !s.ok()) return teardown(s);
  ready_ = true;
  on_state_(true, "");
  ORCA_LOG(INFO) << "pipeline session " << session_id << " ready (" << stubs_.size() << " stages)";
  absl::Time next_probe = absl::Now() + options_.probe_interval;
  while (true) {
    std::deque<Outgoing> batch;
    if (absl::Status s = TakeOutgoing(&batch); !s.ok()) return teardown(s);
    if (absl::Status s = SendOutgoing(session, batch); !s.ok()) return teardown(s);
    if (absl::Now() >= next_probe) {
      if (absl::Status p = Probe(session_id); !p.ok()) return teardown(p);
      next_probe = absl::Now() + options_.probe_interval;
    }
  }
}

absl::Status RemoteEngineClient::AwaitSessionReady(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stop_) return absl::CancelledError("stopping");
    if (!broken_.empty()) return absl::UnavailableError(broken_);
    if (session_ready_) return absl::OkStatus();
    if (absl::Now() > deadline) return absl::DeadlineExceededError("the pipeline did not connect in time");
    mu_.AwaitWithTimeout(absl::Condition(&session_ready_), kPoll);
  }
}

absl::Status RemoteEngineClient::TakeOutgoing(std::deque<Outgoing>* batch) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](RemoteEngineClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                             return c->stop_ || !c->outgoing_.empty() || !c->broken_.empty();
                           },
                           this),
                       kPoll);
  const absl::Time now = absl::Now();
  if (stop_) return absl::CancelledError("stopping");
  if (!broken_.empty()) return absl::UnavailableError(broken_);
  for (const auto& [id, sent] : outstanding_) {
    if (now - sent > options_.worker_timeout) {
      return absl::DeadlineExceededError(absl::StrCat("iteration ", id, " not back after ",
                                                      absl::FormatDuration(options_.worker_timeout),
                                                      ": a stage is dead or hung"));
    }
  }
  batch->swap(outgoing_);
  for (const Outgoing& o : *batch)
    if (const auto* plan = std::get_if<sched::IterationPlan>(&o)) outstanding_[plan->iteration_id] = now;
  return absl::OkStatus();
}

absl::Status RemoteEngineClient::SendOutgoing(Session& session, std::deque<Outgoing>& batch) {
  for (Outgoing& o : batch) {
    v1::ControlMessage msg;
    msg.set_session_id(session.id);
    msg.set_sent_unix_micros(absl::ToUnixMicros(absl::Now()));
    if (auto* plan = std::get_if<sched::IterationPlan>(&o)) {
      services::PlanToControlMessage(*plan, &msg);
    } else {
      for (sched::RequestId id : std::get<std::vector<sched::RequestId>>(o)) msg.add_released_request_ids(id);
    }
    if (!session.control->Write(msg)) {
      return absl::UnavailableError(absl::StrCat("control stream to stage 0 (", options_.workers.front(), ") broke"));
    }
  }
  return absl::OkStatus();
}

}  // namespace orca::scheduler
