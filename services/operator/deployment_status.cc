#include "services/operator/deployment_status.h"

#include <ctime>

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
  for (int r = 0; r < d.replicas; ++r) {
    ChildObservation::Replica rep;
    rep.stages = d.pipeline;
    const json* sts = Find(objects, "StatefulSet", PipelineName(d, r));
    const json* sched = Find(objects, "Deployment", SchedulerName(d, r));
    if (sts) rep.ready_stages = static_cast<int32_t>(IntAt(*sts, "status", "readyReplicas"));
    if (sched) rep.scheduler_ready = IntAt(*sched, "status", "availableReplicas") >= 1;
    rep.current = sts && sched && Current(*sts, d.pipeline) && Current(*sched, 1);
    out.replicas.push_back(rep);
  }
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
                   const ChildObservation& observed, const json& previous, const std::string& now) {
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

  int32_t ready = 0;
  bool all_current = observed.gateway_current;
  json pipelines = json::array();
  for (size_t r = 0; r < observed.replicas.size(); ++r) {
    const auto& rep = observed.replicas[r];
    if (rep.Ready()) ++ready;
    all_current = all_current && rep.current;
    pipelines.push_back({{"replica", static_cast<int32_t>(r)},
                         {"stages", rep.stages},
                         {"readyStages", rep.ready_stages},
                         {"schedulerReady", rep.scheduler_ready},
                         {"ready", rep.Ready()}});
  }
  status["replicas"] = d->replicas;
  status["readyReplicas"] = ready;
  status["pipelines"] = pipelines;
  status["selector"] = SchedulerPodSelector(*d);
  status["kvSlots"] = d->scheduler.kv_slots;

  const bool gateway_ok = observed.gateway_desired == 0 || observed.gateway_available >= 1;
  if (d->replicas == 0) {
    SetCondition(conditions, "Available", "False", "ScaledToZero", "spec.replicas is 0", generation, now);
  } else if (ready >= 1 && gateway_ok) {
    SetCondition(conditions, "Available", "True", "MinimumReplicasAvailable",
                 absl::StrCat(ready, "/", d->replicas, " engine replicas ready, ", observed.gateway_available, "/",
                              observed.gateway_desired, " gateway pods available"),
                 generation, now);
  } else if (ready == 0) {
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
    SetCondition(conditions, "Degraded", "False", "AsExpected", "all objects applied", generation, now);
    if (all_current && ready == d->replicas) {
      SetCondition(conditions, "Progressing", "False", "RolloutComplete",
                   absl::StrCat("generation ", generation, " is fully rolled out"), generation, now);
    } else {
      SetCondition(conditions, "Progressing", "True", "RolloutInProgress",
                   absl::StrCat(ready, "/", d->replicas, " engine replicas ready, ", observed.gateway_available, "/",
                                observed.gateway_desired, " gateway pods available"),
                   generation, now);
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
