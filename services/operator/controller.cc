#include "services/operator/controller.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/renderer.h"

namespace orca::k8s {

using nlohmann::json;

namespace {
Reconciler::Options WithMetrics(Reconciler::Options options, OperatorMetrics* metrics) {
  options.metrics = metrics;
  return options;
}
}  // namespace

Controller::Controller(KubeClient* client, EventRecorder* events, OperatorMetrics* metrics, Options options)
    : client_(client),
      metrics_(metrics),
      options_(std::move(options)),
      reconciler_(client, events, WithMetrics(options_.reconciler, metrics)) {
  auto informer = [&](const std::string& api_version, const std::string& plural, const std::string& selector,
                      bool owner_from_labels) {
    Informer::Options o;
    o.collection_path = ResourcePath(api_version, plural, options_.namespace_);
    o.label_selector = selector;
    o.watch_timeout_seconds = options_.watch_timeout_seconds;
    return std::make_unique<Informer>(client_, o, [this, owner_from_labels](const std::string& type, const json& obj) {
      Enqueue(type, obj, owner_from_labels);
    });
  };
  const std::string managed = absl::StrCat(kLabelManagedBy, "=", kManagedByValue);
  deployments_ = informer(kApiVersion, kPlural, "", false);
  statefulsets_ = informer("apps/v1", "statefulsets", managed, true);
  workloads_ = informer("apps/v1", "deployments", managed, true);
}

bool Controller::HasSynced() const {
  return deployments_->HasSynced() && statefulsets_->HasSynced() && workloads_->HasSynced();
}

void Controller::Enqueue(const std::string& type, const json& object, bool owner_from_labels) {
  if (!owner_from_labels) {
    if (type == "DELETED") {
      // Children go with the owner (garbage collection); nothing to do.
      absl::MutexLock lock(&mu_);
      failures_.erase(Informer::KeyOf(object));
      return;
    }
    queue_.Add(Informer::KeyOf(object));
    return;
  }
  const json& meta = object.value("metadata", json::object());
  const json& labels = meta.value("labels", json::object());
  if (!labels.is_object() || !labels.contains(kLabelDeployment) || !labels[kLabelDeployment].is_string()) return;
  queue_.Add(absl::StrCat(meta.value("namespace", ""), "/", labels[kLabelDeployment].get<std::string>()));
}

void Controller::ProcessOne(const std::string& key) {
  std::optional<json> object = deployments_->Get(key);
  if (!object) return;  // deleted, or a child whose owner is gone
  const absl::Time start = absl::Now();
  absl::Status st = reconciler_.Reconcile(*object);
  int failures = 0;
  {
    absl::MutexLock lock(&mu_);
    failures = st.ok() ? 0 : ++failures_[key];
    if (st.ok()) failures_.erase(key);
  }
  if (metrics_) metrics_->RecordReconcile(st.ok(), absl::Now() - start);
  if (st.ok()) return;
  absl::Duration delay = options_.retry_base;
  for (int i = 1; i < failures && delay < options_.retry_max; ++i) delay *= 2;
  delay = std::min(delay, options_.retry_max);
  ORCA_LOG(WARNING).With("orcadeployment", key)
      << "reconcile failed (retry in " << absl::FormatDuration(delay) << "): " << st.message();
  queue_.AddAfter(key, delay);
}

void Controller::Run(const absl::Notification* stop) {
  std::vector<std::thread> threads;
  for (Informer* inf : {deployments_.get(), statefulsets_.get(), workloads_.get()}) {
    threads.emplace_back([inf, stop] { inf->Run(stop); });
  }
  // Periodic resync: re-reconcile everything even when nothing changed (drift, lost events).
  threads.emplace_back([this, stop] {
    while (!stop->WaitForNotificationWithTimeout(options_.resync_period)) {
      for (const json& obj : deployments_->List()) queue_.Add(Informer::KeyOf(obj));
    }
  });
  std::string key;
  while (queue_.Get(stop, &key)) {
    ProcessOne(key);
    queue_.Done(key);
    if (metrics_) {
      metrics_->SetQueueDepth(queue_.Length());
      metrics_->SetManagedDeployments(deployments_->List().size());
    }
  }
  for (auto& t : threads) t.join();
}

}  // namespace orca::k8s
