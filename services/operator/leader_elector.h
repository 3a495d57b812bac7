#pragma once
/// Leader election with a coordination.k8s.io/v1 Lease, as client-go does it:
/// the holder renews spec.renewTime every retry period; a candidate takes the
/// Lease over only after it has seen the same record unchanged for
/// leaseDurationSeconds of its *own* clock (no trust in other nodes' clocks).
/// Writes are guarded by resourceVersion, so two candidates never both win.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "services/operator/kube_client.h"

namespace orca::k8s {

class LeaderElector {
 public:
  struct Options {
    std::string namespace_;
    std::string lease_name = "orca-operator-leader";
    /// This candidate, e.g. the pod name; must be unique among candidates.
    std::string identity;
    absl::Duration lease_duration = absl::Seconds(15);
    /// A leader that could not renew for this long steps down.
    absl::Duration renew_deadline = absl::Seconds(10);
    absl::Duration retry_period = absl::Seconds(2);
    /// Injectable clock (tests).
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  LeaderElector(KubeClient* client, Options options);

  /// One acquire-or-renew round: true when this candidate holds the Lease afterwards.
  absl::StatusOr<bool> TryAcquireOrRenew();
  /// Gives the Lease up (empty holder) if this candidate holds it, so a successor need not wait.
  absl::Status Release();
  bool IsLeader() const;

  /// Campaigns until leading, calls `on_started_leading`, renews until `stop`
  /// (then releases) or until renewing fails for renew_deadline (then calls
  /// `on_stopped_leading`). Blocking.
  void Run(const absl::Notification* stop, const std::function<void()>& on_started_leading,
           const std::function<void()>& on_stopped_leading);

  /// RFC 3339 with microseconds, the Lease's MicroTime format.
  static std::string FormatMicroTime(absl::Time t);

 private:
  std::string LeasePath() const;

  KubeClient* client_;
  Options options_;
  mutable absl::Mutex mu_;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  // The last record seen and when (local clock) it was first seen as it is.
  std::string observed_holder_ ABSL_GUARDED_BY(mu_);
  std::string observed_renew_time_ ABSL_GUARDED_BY(mu_);
  absl::Time observed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_renew_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace orca::k8s
