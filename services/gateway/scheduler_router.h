#pragma once
/// Routes requests across the schedulers of several engine replicas.
///
/// One gRPC channel per scheduler address. A background thread polls every
/// scheduler's GetStats about once a second for readiness, model info and
/// load. Acquire() picks the ready scheduler with the fewest requests this
/// gateway has outstanding on it (ties broken round-robin); a scheduler whose
/// call fails with UNAVAILABLE is taken out until a poll finds it ready again.
///
/// The schedulers are a fixed list, or discovered through DNS: every poll
/// re-resolves one name (e.g. a headless Service with one A record per
/// scheduler pod) and adds or drops backends, so engine replicas scale
/// without restarting gateways. Leases keep a dropped backend alive until
/// their calls end.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orca/v1/scheduler.grpc.pb.h"

namespace orca::gateway {

class SchedulerRouter;

/// What the router knows about one scheduler.
struct SchedulerStatus {
  std::string address;
  bool ready = false;
  /// Why it is not ready (poll error or the scheduler's own reason).
  std::string not_ready_reason;
  /// Requests this gateway has in flight on it.
  int64_t outstanding = 0;
  /// The last successful GetStats answer.
  orca::v1::SchedulerStats stats;
  bool has_stats = false;
};

/// A reservation of one scheduler for one call: counts as outstanding until
/// released (destroyed). Movable, not copyable.
class SchedulerLease {
 public:
  SchedulerLease() = default;
  SchedulerLease(SchedulerLease&& other) noexcept;
  SchedulerLease& operator=(SchedulerLease&& other) noexcept;
  SchedulerLease(const SchedulerLease&) = delete;
  SchedulerLease& operator=(const SchedulerLease&) = delete;
  ~SchedulerLease();

  bool valid() const { return backend_ != nullptr; }
  orca::v1::Scheduler::Stub* stub() const;
  const std::string& address() const;
  /// Adds the scheduler's API key to a call (when one is configured).
  void Authorize(grpc::ClientContext* context) const;
  /// Another reservation of the same scheduler, counted as one more outstanding call:
  /// the n sequences of one prompt go to one scheduler as one group (it counts their KV
  /// together and may share the prompt's). Invalid when this one is.
  [[nodiscard]] SchedulerLease SameScheduler() const;
  /// Ends the reservation. `unavailable` marks the scheduler not ready until
  /// the next successful poll (its call failed with UNAVAILABLE).
  void Release(bool unavailable = false);
  /// Keeps the scheduler's channel from being destroyed until the returned
  /// pointer goes, whatever happens to the lease or the router: a call holds
  /// it until its ClientContext is gone (see ChannelReaper in the .cc).
  std::shared_ptr<const void> Pin() const { return backend_; }

 private:
  friend class SchedulerRouter;
  struct Backend;
  class ChannelReaper;
  explicit SchedulerLease(std::shared_ptr<Backend> backend) : backend_(std::move(backend)) {}
  std::shared_ptr<Backend> backend_;
};

/// The KV budget the ready schedulers report, for sizing requests before they are sent:
/// the most conservative over them (the smallest limit, the largest block, sharing only
/// when all share).
struct SchedulerKvLimits {
  /// The most KV slots one request, or the n sequences of one prompt together, may take
  /// (SchedulerStats.max_request_kv_slots, or kv_slots_total from a scheduler that does
  /// not report it); 0 = unknown.
  int64_t max_request_kv_slots = 0;
  int32_t kv_block_size = 1;
  /// The sequences of one prompt share its full KV blocks (core/common/kv_footprint.h).
  bool shares_group_prompts = false;
};

class SchedulerRouter {
 public:
  struct Options {
    std::vector<std::string> addresses;
    /// "HOST:PORT": discover schedulers as HOST's addresses at PORT instead of
    /// `addresses` (which must then be empty); re-resolved every poll.
    std::string dns_target;
    /// Resolves HOST to IP addresses (tests inject one); default getaddrinfo.
    /// An error keeps the current backends; an empty list drops them all.
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& host)> resolve;
    absl::Duration poll_interval = absl::Seconds(1);
    absl::Duration stats_timeout = absl::Seconds(1);
    /// A ready scheduler whose stats polls time out stays ready this long after its last
    /// answer: a stall (a GC or page-fault pause, CPU starvation, SIGSTOP) costs its requests
    /// latency, not a 503. A refused or reset connection takes it out at once.
    absl::Duration stall_grace = absl::Seconds(5);
    /// False: no background polling thread (tests call PollNow()).
    bool start_polling = true;
    /// Called after every poll with whether any scheduler is ready (e.g. to
    /// drive the gRPC health status). Runs on the polling thread.
    std::function<void(bool any_ready)> on_poll;
    /// The internal token, sent as "authorization: Bearer <token>" on every call (the schedulers
    /// require it: services/common/internal_auth.h); "" = none.
    std::string api_key;
  };

  /// InvalidArgument when `addresses` is empty or one is blank (and no
  /// `dns_target`), or when `dns_target` is not HOST:PORT. Does not wait
  /// for the schedulers; the first poll runs at once in the background.
  static absl::StatusOr<std::unique_ptr<SchedulerRouter>> Create(Options options);
  ~SchedulerRouter();
  SchedulerRouter(const SchedulerRouter&) = delete;
  SchedulerRouter& operator=(const SchedulerRouter&) = delete;

  /// The ready scheduler with the fewest outstanding requests, reserved.
  /// Unavailable (with the reasons) when none is ready.
  absl::StatusOr<SchedulerLease> Acquire();

  bool AnyReady() const;
  std::vector<SchedulerStatus> Snapshot() const;
  /// Smallest positive `max_context` among ready schedulers; 0 when unknown.
  int32_t MaxContext() const;
  /// The KV budget of the ready schedulers (SchedulerKvLimits); zeros when none reported.
  SchedulerKvLimits KvLimits() const;

  /// With `dns_target`: resolves it now and adds/drops backends to match.
  void RefreshDiscovery();
  /// Polls every scheduler now and waits for the answers (bounded by stats_timeout).
  void PollNow();
  /// Waits until some scheduler is ready; false on timeout.
  bool WaitUntilReady(absl::Duration timeout);
  /// Stops the polling thread (also done by the destructor).
  void Stop();

 private:
  using Backend = SchedulerLease::Backend;
  explicit SchedulerRouter(Options options);
  void PollLoop();
  std::vector<std::shared_ptr<Backend>> Backends() const;

  const Options options_;
  std::string dns_host_;
  std::string dns_port_;
  mutable absl::Mutex backends_mu_;
  std::vector<std::shared_ptr<Backend>> backends_ ABSL_GUARDED_BY(backends_mu_);
  std::atomic<uint64_t> next_pick_{0};
  const std::shared_ptr<SchedulerLease::ChannelReaper> reaper_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread poller_;
};

}  // namespace orca::gateway
