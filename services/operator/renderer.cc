#include "services/operator/renderer.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/operator/pod_builder.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

constexpr char kWorkerConfig[] = "worker.yaml";
constexpr char kSchedulerConfig[] = "scheduler.yaml";
constexpr char kGatewayConfig[] = "gateway.yaml";

std::string ServiceDomain(const OrcaDeployment& d, const RenderOptions& o) {
  return absl::StrCat(d.namespace_, ".svc.", o.cluster_domain);
}

std::string WorkerImage(const OrcaDeployment& d) {
  if (!d.worker.image.empty()) return d.worker.image;
  // GPU pods need the CUDA build; CPU pods keep the much smaller CPU image.
  return d.UsesGpus() ? d.image.CudaReference() : d.image.Reference();
}

std::string ImageOr(const OrcaDeployment& d, const std::string& override_image) {
  return override_image.empty() ? d.image.Reference() : override_image;
}

FlagList WorkerFlags(const OrcaDeployment& d, int r, const std::string& rev, const RenderOptions& o) {
  std::vector<std::string> stages;
  for (int i = 0; i < d.pipeline; ++i) stages.push_back(StageAddress(d, r, rev, i, o));
  FlagList flags = {
      {"listen", absl::StrCat("0.0.0.0:", kWorkerGrpcPort)},
      {"http-listen", absl::StrCat("0.0.0.0:", kWorkerHttpPort)},
      {"model", d.model.source.ContainerModelPath()},
      {"model-name", d.model.served_model_name},
      {"dtype", d.model.dtype},
      {"stage-from-hostname", true},
      {"num-stages", d.pipeline},
      {"tensor-parallel", d.tensor},
      {"workers", absl::StrJoin(stages, ",")},
      {"scheduler", GroupSchedulerAddress(d, r, rev, o)},
      {"deployment-id", absl::StrCat(d.namespace_, ".", GroupName(d, r, rev))},
      {"n-slots", d.scheduler.kv_slots},
      // The scheduler's: the session's formation refuses a mismatch.
      {"kv-block-size", d.scheduler.kv_block_size},
      // A fixed port, so that NetworkPolicies can admit the data plane by name.
      {"data-plane-port", kWorkerDataPlanePort},
  };
  // The internal token: the worker's port requires it, and it is sent to the scheduler
  // (rendezvous) and to the next stage (control).
  flags.emplace_back("internal-token-file", InternalTokenPath());
  if (d.worker.threads > 0) flags.emplace_back("threads", d.worker.threads);
  if (d.worker.kv_local_slots > 0) flags.emplace_back("kv-local-slots", d.worker.kv_local_slots);
  // No iteration exceeds the scheduler's token budget: reserving it leaves nothing to grow.
  if (d.scheduler.max_num_batched_tokens > 0) flags.emplace_back("reserve-tokens", d.scheduler.max_num_batched_tokens);
  // Pods given GPUs run the CUDA backend (one tensor-parallel shard per GPU).
  if (d.UsesGpus()) flags.emplace_back("device", "cuda");
  // A cached prefix needs its sliding-window layers' KV too: the scheduler refuses workers that keep only the window.
  if (d.scheduler.enable_prefix_caching) flags.emplace_back("swa-full", true);
  return flags;
}

FlagList SchedulerFlags(const OrcaDeployment& d, int r, const std::string& rev, const RenderOptions& o) {
  std::vector<std::string> stages;
  for (int i = 0; i < d.pipeline; ++i) stages.push_back(StageAddress(d, r, rev, i, o));
  const SchedulerSpec& s = d.scheduler;
  FlagList flags = {
      {"listen", absl::StrCat("0.0.0.0:", kSchedulerGrpcPort)},
      {"http-listen", absl::StrCat("0.0.0.0:", kSchedulerHttpPort)},
      {"workers", absl::StrJoin(stages, ",")},
      {"model-name", d.model.served_model_name},
      {"policy", s.policy},
      {"max-bs", s.max_batch_size},
      {"n-slots", s.kv_slots},
      {"n-workers", s.num_workers},
      {"max-queued-requests", s.max_queued},
      {"kv-block-size", s.kv_block_size},
      {"max-num-batched-tokens", s.max_num_batched_tokens},
      {"max-prefill-slowdown", s.max_prefill_slowdown},
      {"long-prefill-token-threshold", s.long_prefill_token_threshold},
      {"enable-prefix-caching", s.enable_prefix_caching},
      {"scheduling-order", s.scheduling_order},
      {"priority-aging-ms", s.priority_aging_ms},
      {"drain-grace-seconds", s.drain_grace_seconds},
  };
  // The internal token: the scheduler's port requires it, and it is sent to the workers.
  flags.emplace_back("internal-token-file", InternalTokenPath());
  return flags;
}

FlagList GatewayFlags(const OrcaDeployment& d, const RenderOptions& o) {
  FlagList flags = {
      {"listen", absl::StrCat("0.0.0.0:", kGatewayHttpPort)},
      {"grpc-listen", absl::StrCat("0.0.0.0:", kGatewayGrpcPort)},
  };
  if (o.scheduler_discovery == SchedulerDiscovery::kDns) {
    flags.emplace_back("schedulers-dns", SchedulersDnsAddress(d, o));
  } else {
    std::vector<std::string> schedulers;
    for (int r = 0; r < d.replicas; ++r) schedulers.push_back(ReplicaSchedulerAddress(d, r, o));
    flags.emplace_back("schedulers", absl::StrJoin(schedulers, ","));
  }
  flags.emplace_back("model", d.model.source.ContainerModelPath());
  flags.emplace_back("served-model-name", d.model.served_model_name);
  if (!d.gateway.api_keys_secret.empty()) {
    flags.emplace_back("api-keys-file", absl::StrCat(kSecretMountPath, "/", d.gateway.api_keys_key));
  }
  // The internal token, sent to the schedulers.
  flags.emplace_back("internal-token-file", InternalTokenPath());
  flags.emplace_back("drain-grace-seconds", d.gateway.drain_grace_seconds);
  return flags;
}

// A headless Service that publishes pods before they are Ready: whatever is dialed while a
// pipeline forms (stages, the group's scheduler) must be reachable before readiness, which
// depends on that very formation.
json HeadlessService(const OrcaDeployment& d, const std::string& name, json labels, json selector, json ports) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(d, name, std::move(labels))},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", std::move(selector)},
            {"ports", std::move(ports)}}}};
}

json ScrapedLabels(const OrcaDeployment& d, const std::string& component) {
  json labels = Labels(d, component);
  labels[kLabelScrape] = "true";
  return labels;
}

// Worker pods of different engine replicas prefer different nodes (a lost node takes one
// replica down, not several); replicas spread over zones. Both soft; the user's own
// affinity / topologySpreadConstraints replace them.
void AddWorkerPlacement(const OrcaDeployment& d, int r, json& pod_spec) {
  if (d.worker.affinity.is_object()) {
    pod_spec["affinity"] = d.worker.affinity;
  } else {
    json selector = {
        {"matchLabels", SelectorLabels(d, "worker")},
        {"matchExpressions",
         json::array({{{"key", kLabelReplica}, {"operator", "NotIn"}, {"values", json::array({std::to_string(r)})}}})}};
    pod_spec["affinity"] = {
        {"podAntiAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           json::array({{{"weight", 100},
                         {"podAffinityTerm",
                          {{"topologyKey", "kubernetes.io/hostname"}, {"labelSelector", std::move(selector)}}}}})}}}};
  }
  if (d.worker.topology_spread_constraints.is_array()) {
    pod_spec["topologySpreadConstraints"] = d.worker.topology_spread_constraints;
  } else {
    pod_spec["topologySpreadConstraints"] =
        json::array({{{"maxSkew", 1},
                      {"topologyKey", "topology.kubernetes.io/zone"},
                      {"whenUnsatisfiable", "ScheduleAnyway"},
                      {"labelSelector", {{"matchLabels", SelectorLabels(d, "worker")}}}}});
  }
}

json RenderPipeline(const OrcaDeployment& d, int r, const std::string& rev) {
  const std::string image = WorkerImage(d);
  json container = MainContainer(d, "worker", image, "orca-worker", kWorkerConfig, d.worker.resources, d.worker.extras);
  // $(POD_IP) is expanded by the kubelet: the data plane binds to the pod address. Before the
  // user's args, so that theirs win.
  container["args"].insert(container["args"].begin() + 1, "--data-plane-host=$(POD_IP)");
  container["env"] = json::array({
      {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
      {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
  });
  AddEnv(d.worker.extras, container);
  container["ports"] = json::array({ContainerPort("grpc", kWorkerGrpcPort), ContainerPort("http", kWorkerHttpPort),
                                    ContainerPort("data-plane", kWorkerDataPlanePort)});
  AddPreStopSleep(d.scheduler.drain_grace_seconds, container);
  json pod_spec = PodSpec(d, json::object(), GroupName(d, r, rev), WorkerTerminationGraceSeconds(d));
  AddInternalToken(d, pod_spec, container);
  AddModel(d, image, pod_spec, container);
  if (d.UsesGpus()) {
    // NCCL's shared-memory transport needs far more than the runtime's 64 MiB /dev/shm.
    pod_spec["volumes"].push_back(
        {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", d.worker.shm_size}}}});
    container["volumeMounts"].push_back({{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  }
  if (!d.worker.runtime_class_name.empty()) pod_spec["runtimeClassName"] = d.worker.runtime_class_name;
  pod_spec["containers"] = json::array({container});
  if (!d.worker.node_selector.empty()) pod_spec["nodeSelector"] = d.worker.node_selector;
  if (!d.worker.tolerations.empty()) pod_spec["tolerations"] = d.worker.tolerations;
  AddWorkerPlacement(d, r, pod_spec);
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", Metadata(d, GroupName(d, r, rev), Labels(d, "worker", r, rev))},
          {"spec",
           {{"serviceName", WorkersServiceName(d)},
            {"replicas", d.pipeline},
            {"podManagementPolicy", "Parallel"},
            // A group's template never changes (a new revision is a new StatefulSet); OnDelete also
            // keeps a hand edit from rolling a pipeline pod by pod into a half-old, half-new group.
            {"updateStrategy", {{"type", "OnDelete"}}},
            {"selector", {{"matchLabels", SelectorLabels(d, "worker", r, rev)}}},
            {"template", {{"metadata", {{"labels", Labels(d, "worker", r, rev)}}}, {"spec", pod_spec}}}}}};
}

json RenderScheduler(const OrcaDeployment& d, int r, const std::string& rev) {
  json container = MainContainer(d, "scheduler", ImageOr(d, d.scheduler.image), "orca-scheduler", kSchedulerConfig,
                                 d.scheduler.resources, d.scheduler.extras);
  AddEnv(d.scheduler.extras, container);
  container["ports"] =
      json::array({ContainerPort("grpc", kSchedulerGrpcPort), ContainerPort("http", kSchedulerHttpPort)});
  json pod_spec = PodSpec(d, json::object(), GroupName(d, r, rev), SchedulerTerminationGraceSeconds(d));
  AddInternalToken(d, pod_spec, container);
  pod_spec["containers"] = json::array({container});
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", Metadata(d, GroupSchedulerName(d, r, rev), Labels(d, "scheduler", r, rev))},
          {"spec",
           {// A StatefulSet: never two engine masters driving one pipeline, not even while one terminates.
            {"serviceName", SchedulersServiceName(d)},
            {"replicas", 1},
            {"updateStrategy", {{"type", "OnDelete"}}},
            {"selector", {{"matchLabels", SelectorLabels(d, "scheduler", r, rev)}}},
            {"template", {{"metadata", {{"labels", Labels(d, "scheduler", r, rev)}}}, {"spec", pod_spec}}}}}};
}

json RenderGateway(const OrcaDeployment& d, const RenderOptions& o) {
  const std::string image = ImageOr(d, d.gateway.image);
  json container =
      MainContainer(d, "gateway", image, "orca-gateway", kGatewayConfig, d.gateway.resources, d.gateway.extras);
  AddEnv(d.gateway.extras, container);
  container["ports"] = json::array({ContainerPort("http", kGatewayHttpPort), ContainerPort("grpc", kGatewayGrpcPort)});
  AddPreStopSleep(kGatewayPreStopSeconds, container);
  json pod_spec = PodSpec(d, json::object(), GatewayName(d), GatewayTerminationGraceSeconds(d));
  AddInternalToken(d, pod_spec, container);
  AddModel(d, image, pod_spec, container);
  if (!d.gateway.api_keys_secret.empty()) {
    pod_spec["volumes"].push_back({{"name", "api-keys"}, {"secret", {{"secretName", d.gateway.api_keys_secret}}}});
    container["volumeMounts"].push_back({{"name", "api-keys"}, {"mountPath", kSecretMountPath}, {"readOnly", true}});
  }
  pod_spec["containers"] = json::array({container});
  // Without an engine replica there is nothing to route to: scale the gateway down too.
  const int replicas = d.replicas == 0 ? 0 : d.gateway.replicas;
  const std::string hash = Fnv1aHex(RenderGatewayConfig(d, o));
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", Metadata(d, GatewayName(d), Labels(d, "gateway"))},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", SelectorLabels(d, "gateway")}}},
            {"template",
             {{"metadata", {{"labels", Labels(d, "gateway")}, {"annotations", {{kConfigHashAnnotation, hash}}}}},
              {"spec", pod_spec}}}}}};
}

json RenderGatewayService(const OrcaDeployment& d) {
  json meta = Metadata(d, GatewayName(d), ScrapedLabels(d, "gateway"));
  if (!d.gateway.service_annotations.empty()) meta["annotations"] = d.gateway.service_annotations;
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", meta},
          {"spec",
           {{"type", d.gateway.service_type},
            {"selector", SelectorLabels(d, "gateway")},
            {"ports", json::array({ServicePort("http", d.gateway.port, "http"),
                                   ServicePort("grpc", kGatewayGrpcPort, "grpc")})}}}};
}

json Pdb(const OrcaDeployment& d, const std::string& name, const std::string& component, json selector) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", Metadata(d, name, Labels(d, component))},
          {"spec",
           {{"maxUnavailable", 1},
            // Evicting a pod that is not Ready costs nothing; without this a broken group blocks drains.
            {"unhealthyPodEvictionPolicy", "AlwaysAllow"},
            {"selector", std::move(selector)}}}};
}

// One group at a time: evicting any engine pod makes its whole group unready (a stage is
// Ready only with its peers), so maxUnavailable 1 over all engine pods lets a drain take
// down one group, then waits until it serves again.
std::vector<json> RenderDisruptionBudgets(const OrcaDeployment& d) {
  std::vector<json> out;
  if (d.replicas == 0) return out;
  out.push_back(Pdb(d, absl::StrCat(d.name, "-engine"), "engine",
                    {{"matchLabels", {{"app.kubernetes.io/instance", d.name}, {kLabelDeployment, d.name}}},
                     {"matchExpressions", json::array({{{"key", kLabelComponent},
                                                        {"operator", "In"},
                                                        {"values", json::array({"scheduler", "worker"})}}})}}));
  if (d.gateway.replicas > 0) {
    out.push_back(Pdb(d, GatewayName(d), "gateway", {{"matchLabels", SelectorLabels(d, "gateway")}}));
  }
  return out;
}

json PortRule(std::initializer_list<const char*> ports, json from = nullptr) {
  json rule = {{"ports", json::array()}};
  for (const char* p : ports) rule["ports"].push_back({{"protocol", "TCP"}, {"port", p}});
  if (!from.is_null()) rule["from"] = std::move(from);
  return rule;
}

json PodsOf(const OrcaDeployment& d, const std::string& component) {
  return {{"podSelector", {{"matchLabels", SelectorLabels(d, component)}}}};
}

json NetworkPolicy(const OrcaDeployment& d, const std::string& component, json ingress) {
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", Metadata(d, absl::StrCat(d.name, "-", component == "gateway" ? "gateway" : component + "s"),
                                Labels(d, component))},
          {"spec",
           {{"podSelector", {{"matchLabels", SelectorLabels(d, component)}}},
            {"policyTypes", json::array({"Ingress"})},
            {"ingress", std::move(ingress)}}}};
}

// Ingress only what flows between Orca's pods (by named port), plus /metrics and probes on `http`.
std::vector<json> RenderNetworkPolicies(const OrcaDeployment& d) {
  if (!d.network_policy) return {};
  return {
      NetworkPolicy(d, "worker",
                    json::array({PortRule({"grpc"}, json::array({PodsOf(d, "worker"), PodsOf(d, "scheduler")})),
                                 PortRule({"data-plane"}, json::array({PodsOf(d, "worker")})), PortRule({"http"})})),
      NetworkPolicy(d, "scheduler",
                    json::array({PortRule({"grpc"}, json::array({PodsOf(d, "gateway"), PodsOf(d, "worker")})),
                                 PortRule({"http"})})),
      NetworkPolicy(d, "gateway", json::array({PortRule({"http", "grpc"})})),
  };
}

json RenderServiceMonitor(const OrcaDeployment& d) {
  json labels = Labels(d, "monitoring");
  for (const auto& [k, v] : d.monitoring.labels) labels[k] = v;
  // Target labels the dashboards filter on: namespace and pod come from the Prometheus Operator.
  const json relabelings =
      json::array({{{"sourceLabels", json::array({"__meta_kubernetes_pod_label_serving_orca_dev_deployment"})},
                    {"targetLabel", "orca_deployment"},
                    {"action", "replace"}},
                   {{"sourceLabels", json::array({"__meta_kubernetes_pod_label_serving_orca_dev_replica"})},
                    {"targetLabel", "replica"},
                    {"action", "replace"}}});
  return {{"apiVersion", "monitoring.coreos.com/v1"},
          {"kind", "ServiceMonitor"},
          {"metadata", Metadata(d, d.name, labels)},
          {"spec",
           {{"selector",
             {{"matchLabels",
               {{"app.kubernetes.io/instance", d.name}, {kLabelDeployment, d.name}, {kLabelScrape, "true"}}}}},
            {"namespaceSelector", {{"matchNames", json::array({d.namespace_})}}},
            {"endpoints", json::array({{{"port", "http"},
                                        {"path", "/metrics"},
                                        {"interval", d.monitoring.interval},
                                        {"relabelings", relabelings}}})}}}};
}

}  // namespace

int GatewayTerminationGraceSeconds(const OrcaDeployment& d) {
  return kGatewayPreStopSeconds + d.gateway.drain_grace_seconds + kShutdownMarginSeconds;
}
int SchedulerTerminationGraceSeconds(const OrcaDeployment& d) {
  return d.scheduler.drain_grace_seconds + kShutdownMarginSeconds;
}
int WorkerTerminationGraceSeconds(const OrcaDeployment& d) {
  return d.scheduler.drain_grace_seconds + kShutdownMarginSeconds;
}

std::string GatewayName(const OrcaDeployment& d) { return d.name + "-gateway"; }
std::string WorkersServiceName(const OrcaDeployment& d) { return d.name + "-workers"; }
std::string SchedulersServiceName(const OrcaDeployment& d) { return d.name + "-schedulers"; }
std::string ReplicaSchedulerServiceName(const OrcaDeployment& d, int replica) {
  return absl::StrCat(d.name, "-r", replica, "-scheduler");
}
std::string GroupName(const OrcaDeployment& d, int replica, const std::string& revision) {
  return absl::StrCat(d.name, "-r", replica, "-", revision);
}
std::string GroupSchedulerName(const OrcaDeployment& d, int replica, const std::string& revision) {
  return GroupName(d, replica, revision) + "-sched";
}

std::string StageAddress(const OrcaDeployment& d, int replica, const std::string& revision, int stage,
                         const RenderOptions& o) {
  return absl::StrCat(GroupName(d, replica, revision), "-", stage, ".", WorkersServiceName(d), ".", ServiceDomain(d, o),
                      ":", kWorkerGrpcPort);
}

std::string GroupSchedulerAddress(const OrcaDeployment& d, int replica, const std::string& revision,
                                  const RenderOptions& o) {
  return absl::StrCat(GroupSchedulerName(d, replica, revision), "-0.", SchedulersServiceName(d), ".",
                      ServiceDomain(d, o), ":", kSchedulerGrpcPort);
}

std::string ReplicaSchedulerAddress(const OrcaDeployment& d, int replica, const RenderOptions& o) {
  return absl::StrCat(ReplicaSchedulerServiceName(d, replica), ".", ServiceDomain(d, o), ":", kSchedulerGrpcPort);
}

std::string SchedulersDnsAddress(const OrcaDeployment& d, const RenderOptions& o) {
  return absl::StrCat(SchedulersServiceName(d), ".", ServiceDomain(d, o), ":", kSchedulerGrpcPort);
}

std::string SchedulerPodSelector(const OrcaDeployment& d) {
  return absl::StrCat(kLabelComponent, "=scheduler,app.kubernetes.io/instance=", d.name, ",", kLabelDeployment, "=",
                      d.name);
}

std::string OwnedObjectSelector(const std::string& deployment_name) {
  return absl::StrCat(kLabelManagedBy, "=", kManagedByValue, ",", kLabelDeployment, "=", deployment_name);
}

std::vector<json> RenderGroup(const OrcaDeployment& d, int r, const std::string& rev, const RenderOptions& o) {
  json config = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", Metadata(d, GroupName(d, r, rev), Labels(d, "config", r, rev))},
                 // The group's flag files never change: a pod restarted later reads what its peers read.
                 {"immutable", true},
                 {"data",
                  {{kSchedulerConfig, FlagFile(SchedulerFlags(d, r, rev, o))},
                   {kWorkerConfig, FlagFile(WorkerFlags(d, r, rev, o))}}}};
  return {config, RenderPipeline(d, r, rev), RenderScheduler(d, r, rev)};
}

std::string EngineRevision(const OrcaDeployment& d, const RenderOptions& o) {
  OrcaDeployment anonymous = d;
  anonymous.uid.clear();  // a re-created OrcaDeployment of the same spec is the same revision
  const json group = RenderGroup(anonymous, 0, "", o);
  return Fnv1aHex(group.dump()).substr(0, kRevisionLength);
}

std::string RenderGatewayConfig(const OrcaDeployment& d, const RenderOptions& o) {
  return FlagFile(GatewayFlags(d, o));
}

std::vector<json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& o, const RolloutPlan& plan) {
  std::vector<json> objects;
  objects.push_back(HeadlessService(
      d, WorkersServiceName(d), ScrapedLabels(d, "worker"), SelectorLabels(d, "worker"),
      json::array({ServicePort("grpc", kWorkerGrpcPort, "grpc"), ServicePort("http", kWorkerHttpPort, "http"),
                   ServicePort("data-plane", kWorkerDataPlanePort, "data-plane")})));
  objects.push_back(HeadlessService(
      d, SchedulersServiceName(d), ScrapedLabels(d, "scheduler"), SelectorLabels(d, "scheduler"),
      json::array({ServicePort("grpc", kSchedulerGrpcPort, "grpc"), ServicePort("http", kSchedulerHttpPort, "http")})));
  if (o.scheduler_discovery == SchedulerDiscovery::kList) {
    // Stable per replica whatever its revision, so that engine updates do not change the
    // gateway's flags. No http port: Prometheus scrapes the schedulers once, through the above.
    for (int r = 0; r < d.replicas; ++r) {
      objects.push_back(HeadlessService(d, ReplicaSchedulerServiceName(d, r), Labels(d, "scheduler", r),
                                        SelectorLabels(d, "scheduler", r),
                                        json::array({ServicePort("grpc", kSchedulerGrpcPort, "grpc")})));
    }
  }
  for (int32_t r : plan.apply) {
    for (json& o_ : RenderGroup(d, r, plan.revision, o)) objects.push_back(std::move(o_));
  }
  objects.push_back({{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", Metadata(d, GatewayName(d), Labels(d, "gateway"))},
                     {"data", {{kGatewayConfig, RenderGatewayConfig(d, o)}}}});
  objects.push_back(RenderGatewayService(d));
  objects.push_back(RenderGateway(d, o));
  for (json& pdb : RenderDisruptionBudgets(d)) objects.push_back(std::move(pdb));
  for (json& np : RenderNetworkPolicies(d)) objects.push_back(std::move(np));
  if (d.monitoring.service_monitor && o.service_monitors) objects.push_back(RenderServiceMonitor(d));
  return objects;
}

json RenderInternalTokenSecret(const OrcaDeployment& d, const std::string& token) {
  const SecretKeyRef ref = InternalTokenSecretRef(d);
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", Metadata(d, ref.secret_name, Labels(d, "internal-token"))},
          {"type", "Opaque"},
          {"data", {{ref.key, absl::Base64Escape(token + "\n")}}}};
}

std::vector<json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& o) {
  RolloutPlan plan;
  plan.revision = EngineRevision(d, o);
  for (int r = 0; r < d.replicas; ++r) plan.apply.push_back(r);
  return RenderDesiredObjects(d, o, plan);
}

}  // namespace orca::k8s
