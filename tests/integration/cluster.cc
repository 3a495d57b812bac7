#include "tests/integration/cluster.h"

#include <thread>

namespace orca::testing {

Cluster::Cluster(ClusterOptions o) : o_(std::move(o)) {
  sched_grpc_ = FreePort();
  sched_http_ = FreePort();
  for (int s = 0; s < o_.pipeline; ++s) {
    worker_grpc_.push_back(FreePort());
    worker_http_.push_back(FreePort());
    worker_data_plane_.push_back(FreePort());
  }
  workers_.resize(o_.pipeline);
}

Cluster::~Cluster() {
  if (scheduler_) scheduler_->Stop(15, 5000);
  for (auto& w : workers_)
    if (w) w->Stop(15, 5000);
}

void Cluster::StartWorker(int s) {
  std::string addrs;
  for (int i = 0; i < o_.pipeline; ++i)
    addrs += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(worker_grpc_[i]);
  std::vector<std::string> args = {
      "--model=" + o_.model,
      "--listen=127.0.0.1:" + std::to_string(worker_grpc_[s]),
      "--http-listen=127.0.0.1:" + std::to_string(worker_http_[s]),
      "--data-plane-port=" + std::to_string(worker_data_plane_[s]),
      "--stage=" + std::to_string(s),
      "--num-stages=" + std::to_string(o_.pipeline),
      "--tensor-parallel=" + std::to_string(o_.tensor_parallel),
      "--workers=" + addrs,
      "--scheduler=" + scheduler_address(),
      "--deployment-id=" + o_.name,
      "--n-slots=" + std::to_string(o_.n_slots),
      "--threads=" + std::to_string(o_.tensor_parallel),
      "--peer-timeout-ms=" + std::to_string(o_.peer_timeout_ms),
      "--rendezvous-timeout-ms=20000",
  };
  if (workers_[s]) workers_[s]->Stop(9, 2000);
  workers_[s] =
      std::make_unique<Process>("orca-worker", args, TempPath(o_.name + "-worker" + std::to_string(s) + ".log"));
}

bool Cluster::Start(int timeout_ms) {
  for (int s = 0; s < o_.pipeline; ++s) StartWorker(s);
  std::vector<std::string> args = {
      "--listen=" + scheduler_address(),
      "--http-listen=127.0.0.1:" + std::to_string(sched_http_),
      "--n-slots=" + std::to_string(o_.n_slots),
      "--max-bs=" + std::to_string(o_.max_bs),
      "--policy=" + o_.policy,
      "--worker-timeout-ms=" + std::to_string(o_.worker_timeout_ms),
      "--drain-grace-seconds=5",
  };
  if (o_.n_workers > 0) args.push_back("--n-workers=" + std::to_string(o_.n_workers));
  if (o_.pipeline == 0) {
    args.push_back("--model=" + o_.model);
    args.push_back("--threads=2");
  } else {
    std::string addrs;
    for (int i = 0; i < o_.pipeline; ++i)
      addrs += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(worker_grpc_[i]);
    args.push_back("--workers=" + addrs);
  }
  args.insert(args.end(), o_.extra_scheduler_flags.begin(), o_.extra_scheduler_flags.end());
  scheduler_ = std::make_unique<Process>("orca-scheduler", args, TempPath(o_.name + "-scheduler.log"));
  return WaitReady(sched_http_, timeout_ms);
}

std::unique_ptr<v1::Scheduler::Stub> Cluster::NewStub() const {
  return v1::Scheduler::NewStub(grpc::CreateChannel(scheduler_address(), grpc::InsecureChannelCredentials()));
}

std::string Cluster::Logs() const {
  std::string out = "--- scheduler ---\n" + (scheduler_ ? scheduler_->Log() : "");
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i]) out += "--- worker " + std::to_string(i) + " ---\n" + workers_[i]->Log();
  return out.size() > 20000 ? out.substr(out.size() - 20000) : out;
}

GenerateResult Generate(v1::Scheduler::Stub* stub, const std::vector<int32_t>& prompt, int max_new_tokens,
                        const v1::SamplingParams& sampling, bool ignore_eos) {
  GenerateResult r;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::GenerateRequest req;
  req.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
  req.set_max_new_tokens(max_new_tokens);
  *req.mutable_sampling() = sampling;
  req.set_ignore_eos(ignore_eos);
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    for (const auto& t : resp.tokens()) r.tokens.push_back(t.token_id());
    if (resp.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      r.finish = resp.finish_reason();
      r.error = resp.error();
    }
  }
  r.status = reader->Finish();
  return r;
}

v1::SchedulerStats SettledStats(v1::Scheduler::Stub* stub) {
  v1::SchedulerStats stats;
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext ctx;
    stats.Clear();
    if (stub->GetStats(&ctx, v1::StatsRequest(), &stats).ok() && stats.num_requests_running() == 0 &&
        stats.num_requests_waiting() == 0 && stats.kv_slots_used() == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return stats;
}

}  // namespace orca::testing
