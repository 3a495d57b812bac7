#include "services/gateway/scheduler_router.h"

#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "services/common/api_keys.h"

namespace orca::gateway {

// Where the schedulers' grpc::Channel objects end. A channel must never be destroyed on a gRPC
// callback thread: when it is the process's last channel, gRPC 1.51 then shuts down the shared
// callback queue and joins its polling threads, the current one included (the join fails,
// EDEADLK, and is ignored), deletes the queue, and the thread's next poll aborts in
// grpc_cq_internal_unref (grpc/grpc#37858; seen here when a call's last reference dropped in its
// OnDone after the router was gone). So a Backend hands its channel here as it dies, and the
// router destroys the channels on its own threads: the polling thread, PollNow's caller and its
// destructor, which waits for the backends its calls still pin.
class SchedulerLease::ChannelReaper {
 public:
  void Born() {
    absl::MutexLock lock(&mu_);
    ++live_;
  }
  void Died(std::shared_ptr<grpc::Channel> channel) {
    absl::MutexLock lock(&mu_);
    --live_;
    dead_.push_back(std::move(channel));
  }
  /// Destroys the channels of dead backends on the calling thread.
  void Drain() {
    std::vector<std::shared_ptr<grpc::Channel>> dead;
    {
      absl::MutexLock lock(&mu_);
      dead.swap(dead_);
    }
  }
  /// Waits (draining) until no backend is alive; false on timeout.
  bool AwaitNoBackends(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      Drain();
      absl::MutexLock lock(&mu_);
      auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0 || !dead_.empty(); };
      if (!mu_.AwaitWithDeadline(absl::Condition(&none), deadline)) return false;
      if (live_ == 0 && dead_.empty()) return true;
    }
  }
  int64_t live() const {
    absl::MutexLock lock(&mu_);
    return live_;
  }

 private:
  mutable absl::Mutex mu_;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<grpc::Channel>> dead_ ABSL_GUARDED_BY(mu_);
};

struct SchedulerLease::Backend {
  Backend(std::string addr, std::string key, std::shared_ptr<ChannelReaper> reaper)
      : address(std::move(addr)),
        api_key(std::move(key)),
        channel(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub(orca::v1::Scheduler::NewStub(channel)),
        reaper_(std::move(reaper)) {
    reaper_->Born();
  }
  ~Backend() {
    stub.reset();  // the stub's reference first: the reaper's must be the channel's last
    reaper_->Died(std::move(channel));
  }

  const std::string address;
  const std::string api_key;
  // Set once by the constructor; the destructor hands the channel to the reaper.
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<orca::v1::Scheduler::Stub> stub;
  std::atomic<int64_t> outstanding{0};

  mutable absl::Mutex mu;
  bool ready ABSL_GUARDED_BY(mu) = false;
  std::string not_ready_reason ABSL_GUARDED_BY(mu) = "not polled yet";
  orca::v1::SchedulerStats stats ABSL_GUARDED_BY(mu);
  bool has_stats ABSL_GUARDED_BY(mu) = false;
  absl::Time last_answer ABSL_GUARDED_BY(mu) = absl::InfinitePast();

 private:
  const std::shared_ptr<ChannelReaper> reaper_;
};

// ---- SchedulerLease ----------------------------------------------------------

SchedulerLease::SchedulerLease(SchedulerLease&& other) noexcept : backend_(std::move(other.backend_)) {}

SchedulerLease& SchedulerLease::operator=(SchedulerLease&& other) noexcept {
  if (this != &other) {
    Release();
    backend_ = std::move(other.backend_);
  }
  return *this;
}

SchedulerLease::~SchedulerLease() { Release(); }

orca::v1::Scheduler::Stub* SchedulerLease::stub() const { return backend_ ? backend_->stub.get() : nullptr; }

void SchedulerLease::Authorize(grpc::ClientContext* context) const {
  if (backend_) services::AddBearerKey(context, backend_->api_key);
}

SchedulerLease SchedulerLease::SameScheduler() const {
  if (!backend_) return SchedulerLease();
  backend_->outstanding.fetch_add(1, std::memory_order_relaxed);
  return SchedulerLease(backend_);
}

const std::string& SchedulerLease::address() const {
  static const std::string kNone;
  return backend_ ? backend_->address : kNone;
}

void SchedulerLease::Release(bool unavailable) {
  if (!backend_) return;
  backend_->outstanding.fetch_sub(1, std::memory_order_relaxed);
  if (unavailable) {
    absl::MutexLock lock(&backend_->mu);
    if (backend_->ready) {
      ORCA_LOG(WARNING).With("scheduler", backend_->address) << "scheduler unavailable; routing around it";
    }
    backend_->ready = false;
    backend_->not_ready_reason = "a call failed with UNAVAILABLE";
  }
  backend_.reset();
}

// ---- SchedulerRouter ---------------------------------------------------------

namespace {

// At most one line a second, however many requests find no scheduler ready.
void LogNotReadyReasons(const std::vector<std::string>& reasons) {
  static std::atomic<int64_t> last_nanos{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_nanos.load(std::memory_order_relaxed);
  if (now - last < 1'000'000'000 || !last_nanos.compare_exchange_strong(last, now)) return;
  ORCA_LOG(WARNING) << "no scheduler is ready for a request: " << absl::StrJoin(reasons, "; ");
}


absl::StatusOr<std::vector<std::string>> ResolveWithGetaddrinfo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  // No such name: a headless Service with no endpoints (every scheduler gone) is not an error.
  if (rc == EAI_NONAME || rc == EAI_NODATA) return std::vector<std::string>{};
  if (rc != 0) return absl::UnavailableError(absl::StrCat("resolving ", host, ": ", gai_strerror(rc)));
  std::set<std::string> ips;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST) == 0) ips.insert(ip);
  }
  freeaddrinfo(found);
  return std::vector<std::string>(ips.begin(), ips.end());
}

}  // namespace

SchedulerRouter::SchedulerRouter(Options options)
    : options_(std::move(options)), reaper_(std::make_shared<SchedulerLease::ChannelReaper>()) {
  absl::MutexLock lock(&backends_mu_);
  for (const std::string& address : options_.addresses)
    backends_.push_back(std::make_shared<Backend>(address, options_.api_key, reaper_));
}

absl::StatusOr<std::unique_ptr<SchedulerRouter>> SchedulerRouter::Create(Options options) {
  std::string dns_host, dns_port;
  if (!options.dns_target.empty()) {
    if (!options.addresses.empty()) {
      return absl::InvalidArgumentError("--schedulers-dns and --schedulers are exclusive: give one");
    }
    const size_t colon = options.dns_target.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(options.dns_target.substr(colon + 1), &port) ||
        port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schedulers-dns: want HOST:PORT, got \"", options.dns_target, "\""));
    }
    dns_host = options.dns_target.substr(0, colon);
    dns_port = std::to_string(port);
    if (!options.resolve) options.resolve = ResolveWithGetaddrinfo;
  } else {
    if (options.addresses.empty()) return absl::InvalidArgumentError("--schedulers: at least one address is required");
    for (const std::string& address : options.addresses) {
      if (address.empty()) return absl::InvalidArgumentError("--schedulers: empty address in the list");
    }
  }
  std::unique_ptr<SchedulerRouter> router(new SchedulerRouter(std::move(options)));
  router->dns_host_ = std::move(dns_host);
  router->dns_port_ = std::move(dns_port);
  if (router->options_.start_polling) router->poller_ = std::thread([r = router.get()] { r->PollLoop(); });
  return router;
}

SchedulerRouter::~SchedulerRouter() {
  Stop();
  {
    absl::MutexLock lock(&backends_mu_);
    backends_.clear();
  }
  // Calls still winding down pin their backends until their contexts are gone (SchedulerCall).
  if (!reaper_->AwaitNoBackends(absl::Seconds(30))) {
    // Destroying their channels later, on whichever thread drops the last pin, could abort
    // the process (see ChannelReaper): leave them to the process's exit instead.
    ORCA_LOG(ERROR) << reaper_->live()
                    << " scheduler channels are still in use by calls 30s after the router stopped; leaving them";
    new std::shared_ptr<SchedulerLease::ChannelReaper>(reaper_);  // never freed, deliberately
  }
}

void SchedulerRouter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (poller_.joinable()) poller_.join();
}

std::vector<std::shared_ptr<SchedulerLease::Backend>> SchedulerRouter::Backends() const {
  absl::MutexLock lock(&backends_mu_);
  return backends_;
}

void SchedulerRouter::RefreshDiscovery() {
  if (dns_host_.empty()) return;
  absl::StatusOr<std::vector<std::string>> ips = options_.resolve(dns_host_);
  if (!ips.ok()) {
    ORCA_LOG(WARNING).With("schedulers_dns", options_.dns_target)
        << "keeping the current schedulers: " << ips.status().message();
    return;
  }
  std::set<std::string> wanted;
  for (const std::string& ip : *ips) {
    wanted.insert(ip.find(':') != std::string::npos ? absl::StrCat("[", ip, "]:", dns_port_)
                                                    : absl::StrCat(ip, ":", dns_port_));
  }
  absl::MutexLock lock(&backends_mu_);
  std::vector<std::shared_ptr<Backend>> kept;
  for (auto& backend : backends_) {
    if (wanted.erase(backend->address) > 0) {
      kept.push_back(std::move(backend));
    } else {
      ORCA_LOG(INFO).With("scheduler", backend->address) << "scheduler left " << dns_host_;
    }
  }
  for (const std::string& address : wanted) {
    ORCA_LOG(INFO).With("scheduler", address) << "scheduler discovered through " << dns_host_;
    kept.push_back(std::make_shared<Backend>(address, options_.api_key, reaper_));
  }
  backends_ = std::move(kept);
}

void SchedulerRouter::PollLoop() {
  while (true) {
    RefreshDiscovery();
    PollNow();
    reaper_->Drain();  // channels of backends that discovery dropped and their calls released
    if (options_.on_poll) options_.on_poll(AnyReady());
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_interval);
    if (stopping_) return;
  }
}

void SchedulerRouter::PollNow() {
  struct Poll {
    grpc::ClientContext context;
    orca::v1::StatsRequest request;
    orca::v1::SchedulerStats response;
  };
  const std::vector<std::shared_ptr<Backend>> backends = Backends();
  std::unique_ptr<Poll[]> polls(new Poll[backends.size()]);
  absl::BlockingCounter pending(static_cast<int>(backends.size()));
  for (size_t i = 0; i < backends.size(); ++i) {
    Poll& poll = polls[i];
    poll.context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.stats_timeout));
    Backend* backend = backends[i].get();
    services::AddBearerKey(&poll.context, backend->api_key);
    backend->stub->async()->GetStats(
        &poll.context, &poll.request, &poll.response,
        [backend, &poll, &pending, grace = options_.stall_grace](grpc::Status status) {
          {
            absl::MutexLock lock(&backend->mu);
            const bool was_ready = backend->ready;
            const absl::Time now = absl::Now();
            if (status.ok()) {
              backend->last_answer = now;
              backend->stats = poll.response;
              backend->has_stats = true;
              backend->ready = poll.response.ready() && !poll.response.draining();
              backend->not_ready_reason = backend->ready             ? ""
                                          : poll.response.draining() ? "draining"
                                                                     : "not ready: " + poll.response.not_ready_reason();
            } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && was_ready &&
                       now - backend->last_answer < grace) {
              // Stalled, not gone: keep routing to it (its requests wait) until the grace runs out.
            } else {
              backend->ready = false;
              backend->not_ready_reason = absl::StrCat("GetStats failed: ", status.error_message());
            }
            if (was_ready != backend->ready) {
              ORCA_LOG(INFO).With("scheduler", backend->address)
                  << (backend->ready ? "scheduler ready" : "scheduler not ready: " + backend->not_ready_reason);
            }
          }
          // Last, with no lock held: once the count reaches zero PollNow returns, and `polls`,
          // `pending` and the backends it holds may go (a backend->mu still locked here was
          // destroyed under this thread: "Mutex unlocked when destroyed" in a router test).
          pending.DecrementCount();
        });
  }
  pending.Wait();
}

absl::StatusOr<SchedulerLease> SchedulerRouter::Acquire() {
  const std::vector<std::shared_ptr<Backend>> backends = Backends();
  const size_t n = backends.size();
  if (n == 0) {
    return absl::UnavailableError(absl::StrCat("No scheduler is ready (none found at ", options_.dns_target, ")"));
  }
  const size_t start = next_pick_.fetch_add(1, std::memory_order_relaxed) % n;
  Backend* best = nullptr;
  size_t best_index = 0;
  int64_t best_load = std::numeric_limits<int64_t>::max();
  std::vector<std::string> reasons;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    Backend* backend = backends[i].get();
    {
      absl::MutexLock lock(&backend->mu);
      if (!backend->ready) {
        reasons.push_back(absl::StrCat(backend->address, ": ", backend->not_ready_reason));
        continue;
      }
    }
    const int64_t load = backend->outstanding.load(std::memory_order_relaxed);
    if (load < best_load) {
      best = backend;
      best_index = i;
      best_load = load;
    }
  }
  if (best == nullptr) {
    // The reasons name internal addresses and transport errors: the log and /ready's details
    // (behind the API key) carry them, the client's error does not.
    LogNotReadyReasons(reasons);
    return absl::UnavailableError(absl::StrCat("No scheduler is ready (", n, n == 1 ? " engine replica, " : " engine replicas, ",
                                               "all down or starting); retry the request"));
  }
  best->outstanding.fetch_add(1, std::memory_order_relaxed);
  return SchedulerLease(backends[best_index]);
}

bool SchedulerRouter::AnyReady() const {
  for (const auto& backend : Backends()) {
    absl::MutexLock lock(&backend->mu);
    if (backend->ready) return true;
  }
  return false;
}

std::vector<SchedulerStatus> SchedulerRouter::Snapshot() const {
  std::vector<SchedulerStatus> out;
  for (const auto& backend : Backends()) {
    SchedulerStatus status;
    status.address = backend->address;
    status.outstanding = backend->outstanding.load(std::memory_order_relaxed);
    absl::MutexLock lock(&backend->mu);
    status.ready = backend->ready;
    status.not_ready_reason = backend->not_ready_reason;
    status.stats = backend->stats;
    status.has_stats = backend->has_stats;
    out.push_back(std::move(status));
  }
  return out;
}

int32_t SchedulerRouter::MaxContext() const {
  int32_t best = 0;
  for (const auto& backend : Backends()) {
    absl::MutexLock lock(&backend->mu);
    if (!backend->ready || backend->stats.max_context() <= 0) continue;
    if (best == 0 || backend->stats.max_context() < best) best = backend->stats.max_context();
  }
  return best;
}

SchedulerKvLimits SchedulerRouter::KvLimits() const {
  SchedulerKvLimits limits;
  bool all_share = true;
  for (const auto& backend : Backends()) {
    absl::MutexLock lock(&backend->mu);
    if (!backend->ready || !backend->has_stats) continue;
    const orca::v1::SchedulerStats& stats = backend->stats;
    const int64_t slots = stats.max_request_kv_slots() > 0 ? stats.max_request_kv_slots() : stats.kv_slots_total();
    if (slots <= 0) continue;
    if (limits.max_request_kv_slots == 0 || slots < limits.max_request_kv_slots) limits.max_request_kv_slots = slots;
    limits.kv_block_size = std::max(limits.kv_block_size, stats.kv_block_size());
    all_share = all_share && stats.shares_group_prompts();
  }
  limits.shares_group_prompts = limits.max_request_kv_slots > 0 && all_share;
  return limits;
}

bool SchedulerRouter::WaitUntilReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (AnyReady()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
    RefreshDiscovery();
    PollNow();
    reaper_->Drain();  // channels of backends that discovery dropped and their calls released
  }
}

}  // namespace orca::gateway
