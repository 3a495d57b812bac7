#pragma once
/// The operator's control loop: three informers feed one work queue that a
/// single thread drains through the Reconciler.
///
///   OrcaDeployments ─────────────┐ ADDED/MODIFIED: key ns/name
///   StatefulSets  (managed-by) ──┼─▶ WorkQueue ──▶ Reconciler.Reconcile(cached object)
///   Deployments   (managed-by) ──┘   (owner key        │ error: AddAfter(backoff 1s..2m)
///                                     from labels)      │ ok: forget backoff
///   every `resync`: every cached OrcaDeployment again ◀─┘
///
/// One reconcile at a time keeps ordering simple; reconciles of different
/// objects are independent and short (a few API calls each).

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "services/operator/informer.h"
#include "services/operator/kube_client.h"
#include "services/operator/operator_metrics.h"
#include "services/operator/reconciler.h"
#include "services/operator/work_queue.h"

namespace orca::k8s {

class Controller {
 public:
  struct Options {
    /// Watch this namespace only ("" = all).
    std::string namespace_;
    Reconciler::Options reconciler;
    int watch_timeout_seconds = 300;
    absl::Duration resync_period = absl::Minutes(5);
    absl::Duration retry_base = absl::Seconds(1);
    absl::Duration retry_max = absl::Minutes(2);
  };

  /// `events` and `metrics` may be null.
  Controller(KubeClient* client, EventRecorder* events, OperatorMetrics* metrics, Options options);

  /// Runs informers and the reconcile loop until `stop`. Blocking.
  void Run(const absl::Notification* stop);

  /// True once every informer has listed once.
  bool HasSynced() const;

 private:
  void Enqueue(const std::string& type, const nlohmann::json& object, bool owner_from_labels);
  void ProcessOne(const std::string& key);

  KubeClient* client_;
  OperatorMetrics* metrics_;
  Options options_;
  Reconciler reconciler_;
  WorkQueue queue_;
  std::unique_ptr<Informer> deployments_;
  std::unique_ptr<Informer> statefulsets_;
  std::unique_ptr<Informer> workloads_;
  absl::Mutex mu_;
  std::map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);  // consecutive failures per key
};

}  // namespace orca::k8s
