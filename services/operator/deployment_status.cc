#include "services/operator/deployment_status.h"

#include <ctime>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/operator/renderer.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

int64_t IntAt(const json& obj, const char* section, const char* key) {
  if (!obj.is_object() || !obj.contains(section) || !obj[section].is_object()) return 0;
  const json& s = obj[section];
  if (!s.contains(key) || !s[key].is_number_integer()) return 0;
  return s[key].get<int64_t>();
}

int64_t Generation(const json& obj) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) return 0;
  const json& m = obj["metadata"];
  return m.contains("generation") && m["generation"].is_number_integer() ? m["generation"].get<int64_t>() : 0;
}

// A workload has caught up when its controller observed the latest generation and every pod is updated.
bool Current(const json& obj, int64_t desired) {
  return IntAt(obj, "status", "observedGeneration") >= Generation(obj) &&
         IntAt(obj, "status", "updatedReplicas") >= desired && IntAt(obj, "status", "readyReplicas") >= desired;
}

std::string Label(const json& obj, const char* key) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const json& labels = obj["metadata"].value("labels", json::object());
  return labels.is_object() && labels.contains(key) && labels[key].is_string() ? labels[key].get<std::string>() : "";
}

const json* Find(const std::vector<json>& objects, const std::string& kind, const std::string& name) {
  for (const json& o : objects) {
    if (o.value("kind", "") == kind && o.contains("metadata") && o["metadata"].value("name", "") == name) return &o;
  }
  return nullptr;
}

const json* FindCondition(const json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const json& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

}  // namespace

ChildObservation ObserveChildren(const OrcaDeployment& d, const std::vector<json>& objects) {
  ChildObservation out;
  std::map<std::pair<int32_t, std::string>, ChildObservation::Group> groups;
  for (const json& o : objects) {
    if (!o.is_object() || o.value("kind", "") != "StatefulSet") continue;
    const std::string component = Label(o, kLabelComponent);
    const std::string revision = Label(o, kLabelRevision);
    int32_t replica = -1;
    if (Label(o, kLabelDeployment) != d.name || revision.empty() ||
        !absl::SimpleAtoi(Label(o, kLabelReplica), &replica) || replica < 0) {
      continue;
    }
    ChildObservation::Group& g = groups[{replica, revision}];
    g.replica = replica;
    g.revision = revision;
    if (component == "worker") {
      g.stages = static_cast<int32_t>(IntAt(o, "spec", "replicas"));
      g.created_stages = static_cast<int32_t>(IntAt(o, "status", "replicas"));
      g.ready_stages = static_cast<int32_t>(IntAt(o, "status", "readyReplicas"));
    } else if (component == "scheduler") {
      g.scheduler_exists = IntAt(o, "status", "replicas") >= 1;
      g.scheduler_ready = IntAt(o, "status", "readyReplicas") >= 1;
    }
  }
  for (auto& [key, g] : groups) out.groups.push_back(std::move(g));
  const json* gw = Find(objects, "Deployment", GatewayName(d));
  out.gateway_desired = d.replicas == 0 ? 0 : d.gateway.replicas;
  if (gw) {
    out.gateway_available = static_cast<int32_t>(IntAt(*gw, "status", "availableReplicas"));
    out.gateway_current = Current(*gw, out.gateway_desired);
  } else {
    out.gateway_current = out.gateway_desired == 0;
  }
  return out;
}

std::vector<GroupObservation> GroupsForPlanning(const ChildObservation& observed) {
  std::vector<GroupObservation> out;
  for (const auto& g : observed.groups) out.push_back({g.replica, g.revision, g.Ready()});
  return out;
}

void SetCondition(json& conditions, const std::string& type, const std::string& status, const std::string& reason,
                  const std::string& message, int64_t generation, const std::string& now) {
  if (!conditions.is_array()) conditions = json::array();
  json next = {{"type", type},
               {"status", status},
               {"reason", reason},
               {"message", message},
               {"observedGeneration", generation},
               {"lastTransitionTime", now}};
  for (json& c : conditions) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    if (c.value("status", "") == status && c.contains("lastTransitionTime")) {
      next["lastTransitionTime"] = c["lastTransitionTime"];
    }
    c = std::move(next);
    return;
  }
  conditions.push_back(std::move(next));
}

json ComputeStatus(const OrcaDeployment* d, int64_t generation, const ReconcileResult& result,
                   const ChildObservation& observed, const std::string& revision, const json& previous,
                   const std::string& now) {
  json status = previous.is_object() ? previous : json::object();
  json conditions = status.contains("conditions") ? status["conditions"] : json::array();
  status["observedGeneration"] = generation;

  if (result.kind == ReconcileResult::Kind::kInvalidSpec || d == nullptr) {
    // The children were left as they were: keep what is known about them.
    SetCondition(conditions, "Degraded", "True", "InvalidSpec", result.message, generation, now);
    SetCondition(conditions, "Progressing", "False", "InvalidSpec", "the spec is invalid; fix it to resume reconciling",
                 generation, now);
    if (!FindCondition(status, "Available")) {
      SetCondition(conditions, "Available", "Unknown", "InvalidSpec", "nothing was deployed", generation, now);
    }
    status["conditions"] = conditions;
    return status;
  }

  // Per engine replica in [0, spec.replicas): does a group exist, run the revision, serve?
  std::vector<bool> exists(d->replicas, false), updated(d->replicas, false), ready(d->replicas, false);
  std::vector<int> groups_of(d->replicas, 0);
  bool extra_groups = false;
  json pipelines = json::array();
  for (const auto& g : observed.groups) {
    pipelines.push_back({{"replica", g.replica},
                         {"revision", g.revision},
                         {"stages", g.stages},
                         {"readyStages", g.ready_stages},
                         {"schedulerReady", g.scheduler_ready},
                         {"ready", g.Ready()}});
    if (g.replica >= d->replicas) {
      extra_groups = true;
      continue;
    }
    ++groups_of[g.replica];
    exists[g.replica] = exists[g.replica] || g.Exists();
    updated[g.replica] = updated[g.replica] || (g.revision == revision && g.Exists());
    ready[g.replica] = ready[g.replica] || g.Ready();
  }
  int32_t num_exist = 0, num_updated = 0, num_ready = 0;
  bool rolled_out = !extra_groups;
  for (int r = 0; r < d->replicas; ++r) {
    num_exist += exists[r];
    num_updated += updated[r];
    num_ready += ready[r];
    rolled_out = rolled_out && groups_of[r] == 1 && updated[r] && ready[r];
  }
  status["replicas"] = num_exist;
  status["updatedReplicas"] = num_updated;
  status["readyReplicas"] = num_ready;
  status["revision"] = revision;
  status["pipelines"] = pipelines;
  status["selector"] = SchedulerPodSelector(*d);
  status["kvSlots"] = d->scheduler.kv_slots;

  const std::string summary = absl::StrCat(num_ready, "/", d->replicas, " engine replicas ready, ", num_updated, "/",
                                           d->replicas, " at revision ", revision, ", ", observed.gateway_available,
                                           "/", observed.gateway_desired, " gateway pods available");
  const bool gateway_ok = observed.gateway_desired == 0 || observed.gateway_available >= 1;
  if (d->replicas == 0) {
    SetCondition(conditions, "Available", "False", "ScaledToZero", "spec.replicas is 0", generation, now);
  } else if (num_ready >= 1 && gateway_ok) {
    SetCondition(conditions, "Available", "True", "MinimumReplicasAvailable", summary, generation, now);
  } else if (num_ready == 0) {
    SetCondition(conditions, "Available", "False", "NoReplicaReady",
                 absl::StrCat("0/", d->replicas, " engine replicas ready (scheduler and all ", d->pipeline, " stages)"),
                 generation, now);
  } else {
    SetCondition(conditions, "Available", "False", "GatewayUnavailable",
                 absl::StrCat("0/", observed.gateway_desired, " gateway pods available"), generation, now);
  }

  if (result.kind == ReconcileResult::Kind::kApplyFailed) {
    SetCondition(conditions, "Degraded", "True", "ApplyFailed", result.message, generation, now);
    SetCondition(conditions, "Progressing", "True", "ApplyFailed", "retrying the objects that failed", generation, now);
  } else {
    if (result.kind == ReconcileResult::Kind::kServiceMonitorsNotManaged) {
      SetCondition(conditions, "Degraded", "True", "ServiceMonitorsNotManaged", result.message, generation, now);
    } else {
      SetCondition(conditions, "Degraded", "False", "AsExpected", "all objects applied", generation, now);
    }
    if (rolled_out && observed.gateway_current) {
      SetCondition(conditions, "Progressing", "False", "RolloutComplete",
                   absl::StrCat("generation ", generation, " is fully rolled out (revision ", revision, ")"),
                   generation, now);
    } else {
      SetCondition(conditions, "Progressing", "True", "RolloutInProgress", summary, generation, now);
    }
  }
  status["conditions"] = conditions;
  return status;
}

std::vector<ConditionChange> ConditionChanges(const json& previous, const json& next) {
  std::vector<ConditionChange> changes;
  if (!next.is_object() || !next.contains("conditions")) return changes;
  for (const json& c : next["conditions"]) {
    const std::string type = c.value("type", "");
    const json* before = FindCondition(previous, type);
    const bool changed = before == nullptr || before->value("status", "") != c.value("status", "") ||
                         before->value("reason", "") != c.value("reason", "");
    if (changed) {
      changes.push_back({type, before ? before->value("status", "") : "", c.value("status", ""), c.value("reason", ""),
                         c.value("message", "")});
    }
  }
  return changes;
}

std::string NowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace orca::k8s
