#include "services/operator/reconciler.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "services/operator/deployment_status.h"
#include "services/operator/orca_deployment_spec.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

struct ManagedKind {
  const char* api_version;
  const char* kind;
};
// Every kind the renderer can produce, for pruning.
constexpr ManagedKind kManagedKinds[] = {
    {"v1", "ConfigMap"},
    {"v1", "Service"},
    {"apps/v1", "StatefulSet"},
    {"apps/v1", "Deployment"},
    {"policy/v1", "PodDisruptionBudget"},
    {"networking.k8s.io/v1", "NetworkPolicy"},
    {"monitoring.coreos.com/v1", "ServiceMonitor"},
};
constexpr char kServiceMonitorKind[] = "ServiceMonitor";

std::string Label(const json& object, const char* key) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& labels = object["metadata"].value("labels", json::object());
  return labels.is_object() && labels.contains(key) && labels[key].is_string() ? labels[key].get<std::string>() : "";
}

// The group objects (ConfigMap, StatefulSets) of the groups the plan keeps as they are.
std::vector<json> KeptObjects(const std::vector<json>& live, const RolloutPlan& plan) {
  std::vector<json> kept;
  for (const json& o : live) {
    const std::string revision = Label(o, kLabelRevision);
    if (revision.empty()) continue;
    for (const GroupKey& k : plan.keep) {
      if (k.revision == revision && Label(o, kLabelReplica) == std::to_string(k.replica)) kept.push_back(o);
    }
  }
  return kept;
}

std::string Meta(const json& object, const char* key) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& m = object["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

int64_t MetaInt(const json& object, const char* key) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return 0;
  const json& m = object["metadata"];
  return m.contains(key) && m[key].is_number_integer() ? m[key].get<int64_t>() : 0;
}

bool OwnedBy(const json& object, const std::string& uid) {
  if (!object.contains("metadata") || !object["metadata"].contains("ownerReferences")) return false;
  for (const json& ref : object["metadata"]["ownerReferences"]) {
    if (ref.is_object() && ref.value("uid", "") == uid && ref.value("controller", false)) return true;
  }
  return false;
}

std::string ObjectId(const json& object) { return absl::StrCat(object.value("kind", ""), "/", Meta(object, "name")); }

}  // namespace

Reconciler::Reconciler(KubeClient* client, EventRecorder* events, Options options)
    : client_(client), events_(events), options_(std::move(options)) {}

void Reconciler::Event(const json& object, const std::string& type, const std::string& reason,
                       const std::string& message) {
  if (events_) events_->Record(object, type, reason, message).IgnoreError();
}

std::vector<json> Reconciler::ApplyAll(const std::vector<json>& desired, std::string* failures) {
  std::vector<json> applied;
  std::vector<std::string> errors;
  for (const json& object : desired) {
    auto path = ObjectPath(object);
    if (!path.ok()) {
      errors.push_back(absl::StrCat(ObjectId(object), ": ", path.status().message()));
      continue;
    }
    auto result = client_->Apply(*path, object, options_.field_manager, /*force=*/true);
    if (result.ok()) {
      applied.push_back(*std::move(result));
      continue;
    }
    std::string why(result.status().message());
    if (object.value("kind", "") == "ServiceMonitor" && HttpCodeOf(result.status()) == 404) {
      why =
          "the monitoring.coreos.com/v1 API is not installed (Prometheus Operator); "
          "install it or set monitoring.serviceMonitor.enabled=false";
    }
    errors.push_back(absl::StrCat(ObjectId(object), ": ", why));
  }
  *failures = absl::StrJoin(errors, "; ");
  return applied;
}

std::string Reconciler::EnsureInternalTokenSecret(const json& owner, const OrcaDeployment& d) {
  if (d.scheduler.api_keys.enabled()) return "";  // the user's own Secret
  absl::StatusOr<std::string> token = options_.draw_token();
  if (!token.ok()) return absl::StrCat("drawing the internal token: ", token.status().message());
  const json secret = RenderInternalTokenSecret(d, *token);
  const std::string id = ObjectId(secret);
  auto created = client_->Create(ResourcePath("v1", "secrets", d.namespace_), secret);
  if (created.ok()) {
    Event(owner, "Normal", "InternalTokenCreated",
          absl::StrCat("created ", id, " holding the internal token every pod of this deployment mounts"));
    return "";
  }
  // There already: created by an earlier pass, kept as it is (the pods read it when they start).
  if (HttpCodeOf(created.status()) == 409) return "";
  return absl::StrCat(id, ": ", created.status().message());
}

absl::StatusOr<std::vector<json>> Reconciler::ListOwned(const json& owner) {
  const std::string ns = Meta(owner, "namespace");
  ListOptions list_options;
  list_options.label_selector = OwnedObjectSelector(Meta(owner, "name"));
  std::vector<json> out;
  for (const ManagedKind& mk : kManagedKinds) {
    // Not managed: never even listed, the operator's RBAC may not grant it.
    if (std::string(mk.kind) == kServiceMonitorKind && !options_.render.service_monitors) continue;
    auto list = client_->List(ResourcePath(mk.api_version, PluralForKind(mk.kind), ns), list_options);
    if (HttpCodeOf(list.status()) == 404) continue;  // e.g. no ServiceMonitor API in this cluster
    if (!list.ok()) return Annotate(list.status(), absl::StrCat("listing ", PluralForKind(mk.kind)));
    for (const json& item : list->value("items", json::array())) {
      json object = item;
      object["kind"] = mk.kind;  // list items may omit kind and apiVersion
      object["apiVersion"] = mk.api_version;
      out.push_back(std::move(object));
    }
  }
  return out;
}

absl::Status Reconciler::Prune(const json& owner, const std::vector<json>& live, const std::vector<json>& desired,
                               const std::vector<json>& kept) {
  std::set<std::string> wanted;
  for (const json& o : desired) wanted.insert(ObjectId(o));
  for (const json& o : kept) wanted.insert(ObjectId(o));
  const std::string uid = Meta(owner, "uid");
  for (const json& object : live) {
    if (wanted.count(ObjectId(object)) || !OwnedBy(object, uid)) continue;
    auto path = ObjectPath(object);
    if (!path.ok()) return path.status();
    absl::Status st = client_->Delete(*path);
    if (!st.ok() && !absl::IsNotFound(st)) return st;
    Event(owner, "Normal", "Pruned", absl::StrCat("deleted ", ObjectId(object), ", no longer in the spec"));
  }
  return absl::OkStatus();
}

absl::Status Reconciler::WriteStatus(json object, const std::function<json(const json&)>& compute) {
  for (int attempt = 0; attempt < options_.max_status_attempts; ++attempt) {
    const json previous = object.value("status", json::object());
    const json next = compute(previous);
    if (next == previous) return absl::OkStatus();
    object["status"] = next;
    auto path = ObjectPath(object);
    if (!path.ok()) return path.status();
    auto written = client_->Replace(*path + "/status", object);
    if (written.ok()) {
      for (const ConditionChange& c : ConditionChanges(previous, next)) {
        // Warn about breakage; a deployment that is still starting is not news.
        const bool bad =
            (c.type == "Degraded" && c.status == "True") ||
            (c.type == "Available" && c.status == "False" && c.previous_status == "True" && c.reason != "ScaledToZero");
        Event(object, bad ? "Warning" : "Normal", c.reason, absl::StrCat(c.type, "=", c.status, ": ", c.message));
      }
      return absl::OkStatus();
    }
    if (HttpCodeOf(written.status()) != 409) return written.status();
    // Someone changed the object since we read it: re-read and recompute.
    auto fresh = client_->Get(*path);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
    object = *std::move(fresh);
  }
  return absl::AbortedError(absl::StrCat("status of ", Meta(object, "name"), ": still conflicting after ",
                                         options_.max_status_attempts, " attempts"));
}

absl::Status Reconciler::Reconcile(const json& object) {
  const std::string name = Meta(object, "name");
  const int64_t generation = MetaInt(object, "generation");
  if (!Meta(object, "deletionTimestamp").empty()) {
    // Being deleted (foreground or background): the garbage collector removes the children.
    // Applying anything now would re-create what it just deleted.
    ORCA_LOG(DEBUG).With("orcadeployment", name) << "being deleted; nothing to reconcile";
    return absl::OkStatus();
  }
  auto parsed = ParseOrcaDeployment(object);
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    ORCA_LOG(WARNING).With("orcadeployment", name) << "invalid spec: " << message;
    if (options_.metrics) options_.metrics->RecordInvalidSpec();
    ReconcileResult result{ReconcileResult::Kind::kInvalidSpec, message};
    return WriteStatus(object, [&](const json& previous) {
      return ComputeStatus(nullptr, generation, result, {}, "", previous, NowRfc3339());
    });
  }
  const OrcaDeployment& d = *parsed;
  const std::string revision = EngineRevision(d, options_.render);
  auto live = ListOwned(object);
  if (!live.ok()) {
    const std::string message(live.status().message());
    ReconcileResult result{ReconcileResult::Kind::kApplyFailed, message};
    absl::Status st = WriteStatus(object, [&](const json& previous) {
      return ComputeStatus(&d, generation, result, {}, revision, previous, NowRfc3339());
    });
    st.IgnoreError();
    return absl::UnavailableError(absl::StrCat(name, ": ", message));
  }
  const RolloutPlan plan = PlanRollout(d.replicas, revision, GroupsForPlanning(ObserveChildren(d, *live)),
                                       {d.rollout.max_unavailable, d.rollout.max_surge});
  const std::vector<json> desired = RenderDesiredObjects(d, options_.render, plan);
  // Before the workloads: their pods mount it.
  std::string failures = EnsureInternalTokenSecret(object, d);
  std::string apply_failures;
  std::vector<json> observed_objects = ApplyAll(desired, &apply_failures);
  if (!apply_failures.empty()) failures += absl::StrCat(failures.empty() ? "" : "; ", apply_failures);
  const std::vector<json> kept = KeptObjects(*live, plan);
  absl::Status prune = Prune(object, *live, desired, kept);
  if (!prune.ok()) {
    failures += absl::StrCat(failures.empty() ? "" : "; ", "pruning: ", prune.message());
  }
  observed_objects.insert(observed_objects.end(), kept.begin(), kept.end());
  const ChildObservation observed = ObserveChildren(d, observed_objects);
  ReconcileResult result;
  if (!failures.empty()) {
    result = {ReconcileResult::Kind::kApplyFailed, failures};
  } else if (d.monitoring.service_monitor && !options_.render.service_monitors) {
    result = {ReconcileResult::Kind::kServiceMonitorsNotManaged,
              "spec.monitoring.serviceMonitor.enabled is true, but this operator runs with "
              "--manage-service-monitors=false (Helm value operator.manageServiceMonitors): no ServiceMonitor was "
              "created; everything else is applied"};
  }
  const json previous_status = object.value("status", json::object());
  if (previous_status.value("observedGeneration", int64_t{0}) != generation && failures.empty()) {
    Event(object, "Normal", "Reconciled",
          absl::StrCat("generation ", generation, ": revision ", revision, ", ", d.replicas, " engine replicas x ",
                       d.pipeline, " stages x ", d.tensor, " shards"));
  }
  absl::Status status = WriteStatus(object, [&](const json& previous) {
    return ComputeStatus(&d, generation, result, observed, revision, previous, NowRfc3339());
  });
  if (!failures.empty()) return absl::UnavailableError(absl::StrCat(name, ": ", failures));
  return status;
}

}  // namespace orca::k8s
