#include "services/operator/renderer.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using FlagList = std::vector<std::pair<std::string, json>>;

constexpr int64_t kNonRootUid = 65532;  // the image's "orca" user
constexpr char kConfigMountPath[] = "/etc/orca";
constexpr char kSecretMountPath[] = "/etc/orca-secrets";

std::string Fnv1aHex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// A flag file for --config: one `flag-name: value` line each, values as JSON scalars (valid YAML).
std::string FlagFile(const FlagList& flags) {
  std::string out;
  for (const auto& [key, value] : flags) absl::StrAppend(&out, key, ": ", value.dump(), "\n");
  return out;
}

json Labels(const OrcaDeployment& d, const std::string& component, int replica = -1) {
  json labels = {
      {"app.kubernetes.io/name", "orca"},         {"app.kubernetes.io/instance", d.name},
      {"app.kubernetes.io/component", component}, {"app.kubernetes.io/part-of", "orca"},
      {kLabelManagedBy, kManagedByValue},         {kLabelDeployment, d.name},
  };
  if (replica >= 0) labels[kLabelReplica] = std::to_string(replica);
  return labels;
}

// The stable subset used in selectors (selectors are immutable on workloads).
json SelectorLabels(const OrcaDeployment& d, const std::string& component, int replica = -1) {
  json labels = {
      {"app.kubernetes.io/instance", d.name}, {"app.kubernetes.io/component", component}, {kLabelDeployment, d.name}};
  if (replica >= 0) labels[kLabelReplica] = std::to_string(replica);
  return labels;
}

json Metadata(const OrcaDeployment& d, const std::string& name, json labels) {
  json meta = {{"name", name}, {"namespace", d.namespace_}, {"labels", std::move(labels)}};
  if (!d.uid.empty()) {
    meta["ownerReferences"] = json::array({{{"apiVersion", kApiVersion},
                                            {"kind", kKind},
                                            {"name", d.name},
                                            {"uid", d.uid},
                                            {"controller", true},
                                            {"blockOwnerDeletion", true}}});
  }
  return meta;
}

json ResourcesJson(const ResourceRequirements& r) {
  json out = json::object();
  if (!r.limits.empty()) out["limits"] = r.limits;
  if (!r.requests.empty()) out["requests"] = r.requests;
  return out;
}

json ContainerSecurityContext() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"runAsNonRoot", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

json HttpProbe(const std::string& path, int period, int failures) {
  return {{"httpGet", {{"path", path}, {"port", "http"}}}, {"periodSeconds", period}, {"failureThreshold", failures}};
}

json Port(const std::string& name, int port) { return {{"name", name}, {"containerPort", port}, {"protocol", "TCP"}}; }

json ServicePort(const std::string& name, int port, const std::string& target) {
  return {{"name", name}, {"port", port}, {"targetPort", target}, {"protocol", "TCP"}};
}

std::string ImageFor(const OrcaDeployment& d, const std::string& override_image) {
  return override_image.empty() ? d.image.Reference() : override_image;
}

// One main container: the service binary reading its flag file.
json MainContainer(const OrcaDeployment& d, const std::string& name, const std::string& image,
                   const std::string& binary, const std::string& config_file, const ResourceRequirements& resources) {
  json c = {
      {"name", name},
      {"image", image},
      {"imagePullPolicy", d.image.pull_policy},
      {"command", json::array({binary})},
      {"args", json::array({absl::StrCat("--config=", kConfigMountPath, "/", config_file)})},
      {"securityContext", ContainerSecurityContext()},
      {"volumeMounts", json::array({{{"name", "config"}, {"mountPath", kConfigMountPath}, {"readOnly", true}},
                                    {{"name", "tmp"}, {"mountPath", "/tmp"}}})},
      {"readinessProbe", HttpProbe("/ready", 5, 3)},
      {"livenessProbe", HttpProbe("/health", 10, 3)},
  };
  json res = ResourcesJson(resources);
  if (!res.empty()) c["resources"] = res;
  return c;
}

// Adds the model volume (and the synthesizing init container) to a pod that loads the model.
void AddModel(const OrcaDeployment& d, const std::string& image, json& pod_spec, json& container) {
  const ModelSource& src = d.model.source;
  if (src.kind == ModelSource::Kind::kPath) return;
  json volume = {{"name", "model"}};
  if (src.kind == ModelSource::Kind::kPvc) {
    volume["persistentVolumeClaim"] = {{"claimName", src.claim}, {"readOnly", true}};
  } else {
    volume["emptyDir"] = json::object();
    json args = json::array({"model", "synth"});
    for (const std::string& a : src.synthetic.SynthArgs(src.ContainerModelPath())) args.push_back(a);
    pod_spec["initContainers"] = json::array({{
        {"name", "synthesize-model"},
        {"image", image},
        {"imagePullPolicy", d.image.pull_policy},
        {"command", json::array({"orca"})},
        {"args", args},
        {"securityContext", ContainerSecurityContext()},
        {"volumeMounts", json::array({{{"name", "model"}, {"mountPath", kModelMountPath}}})},
    }});
  }
  pod_spec["volumes"].push_back(volume);
  container["volumeMounts"].push_back(
      {{"name", "model"}, {"mountPath", kModelMountPath}, {"readOnly", src.kind == ModelSource::Kind::kPvc}});
  // Loading a checkpoint can take minutes: liveness waits for the first healthy answer.
  container["startupProbe"] = HttpProbe("/health", 5, 120);
}

json PodSpec(const OrcaDeployment& d, json container, int grace_seconds) {
  json spec = {
      {"automountServiceAccountToken", false},
      {"enableServiceLinks", false},
      {"terminationGracePeriodSeconds", grace_seconds},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", kNonRootUid},
        {"runAsGroup", kNonRootUid},
        {"fsGroup", kNonRootUid},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", json::array({std::move(container)})},
      {"volumes", json::array({{{"name", "config"}, {"configMap", {{"name", ConfigMapName(d)}}}},
                               {{"name", "tmp"}, {"emptyDir", json::object()}}})},
  };
  if (!d.image.pull_secrets.empty()) {
    spec["imagePullSecrets"] = json::array();
    for (const auto& s : d.image.pull_secrets) spec["imagePullSecrets"].push_back({{"name", s}});
  }
  return spec;
}

json PodTemplate(const OrcaDeployment& d, json labels, const std::string& config_hash, json pod_spec) {
  return {{"metadata", {{"labels", std::move(labels)}, {"annotations", {{kConfigHashAnnotation, config_hash}}}}},
          {"spec", std::move(pod_spec)}};
}

std::string ConfigHash(const json& config_data, const std::string& file) {
  return Fnv1aHex(config_data.value(file, std::string()));
}

FlagList WorkerFlags(const OrcaDeployment& d, int r, const RenderOptions& o) {
  std::vector<std::string> stages;
  for (int i = 0; i < d.pipeline; ++i) stages.push_back(StageAddress(d, r, i, o));
  FlagList flags = {
      {"listen", absl::StrCat("0.0.0.0:", kWorkerGrpcPort)},
      {"http-listen", absl::StrCat("0.0.0.0:", kWorkerHttpPort)},
      {"model", d.model.source.ContainerModelPath()},
      {"dtype", d.model.dtype},
      {"stage-from-hostname", true},
      {"num-stages", d.pipeline},
      {"tensor-parallel", d.tensor},
      {"workers", absl::StrJoin(stages, ",")},
      {"scheduler", SchedulerAddress(d, r, o)},
      {"deployment-id", absl::StrCat(d.namespace_, ".", PipelineName(d, r))},
      {"n-slots", d.scheduler.kv_slots},
  };
  if (d.worker.threads > 0) flags.emplace_back("threads", d.worker.threads);
  // Pods given GPUs run the CUDA backend (one tensor-parallel shard per GPU).
  if (d.worker.resources.limits.count("nvidia.com/gpu") || d.worker.resources.requests.count("nvidia.com/gpu"))
    flags.emplace_back("device", "cuda");
  return flags;
}

FlagList SchedulerFlags(const OrcaDeployment& d, int r, const RenderOptions& o) {
  std::vector<std::string> stages;
  for (int i = 0; i < d.pipeline; ++i) stages.push_back(StageAddress(d, r, i, o));
  return {
      {"listen", absl::StrCat("0.0.0.0:", kSchedulerGrpcPort)},
      {"http-listen", absl::StrCat("0.0.0.0:", kSchedulerHttpPort)},
      {"workers", absl::StrJoin(stages, ",")},
      {"model-name", d.model.served_model_name},
      {"policy", d.scheduler.policy},
      {"max-bs", d.scheduler.max_batch_size},
      {"n-slots", d.scheduler.kv_slots},
      {"n-workers", d.scheduler.num_workers},
      {"max-queued-requests", d.scheduler.max_queued},
  };
}

FlagList GatewayFlags(const OrcaDeployment& d, const RenderOptions& o) {
  std::vector<std::string> schedulers;
  for (int r = 0; r < d.replicas; ++r) schedulers.push_back(SchedulerAddress(d, r, o));
  FlagList flags = {
      {"listen", absl::StrCat("0.0.0.0:", kGatewayHttpPort)},
      {"grpc-listen", absl::StrCat("0.0.0.0:", kGatewayGrpcPort)},
      {"schedulers", absl::StrJoin(schedulers, ",")},
      {"model", d.model.source.ContainerModelPath()},
      {"served-model-name", d.model.served_model_name},
  };
  if (!d.gateway.api_keys_secret.empty()) {
    flags.emplace_back("api-keys-file", absl::StrCat(kSecretMountPath, "/", d.gateway.api_keys_key));
  }
  return flags;
}

json RenderPipelineService(const OrcaDeployment& d, int r) {
  // Headless, and publishing not-ready pods: stages must find each other to become ready.
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(d, PipelineName(d, r), Labels(d, "worker", r))},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", SelectorLabels(d, "worker", r)},
            {"ports", json::array({ServicePort("grpc", kWorkerGrpcPort, "grpc"),
                                   ServicePort("http", kWorkerHttpPort, "http")})}}}};
}

json RenderPipeline(const OrcaDeployment& d, int r, const json& config_data) {
  const std::string image = ImageFor(d, d.worker.image);
  json container =
      MainContainer(d, "worker", image, "orca-worker", absl::StrCat("worker-r", r, ".yaml"), d.worker.resources);
  // $(POD_IP) is expanded by the kubelet: the data plane (Gloo) binds to the pod address.
  container["args"].push_back("--data-plane-host=$(POD_IP)");
  container["env"] = json::array({
      {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
      {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
  });
  container["ports"] = json::array({Port("grpc", kWorkerGrpcPort), Port("http", kWorkerHttpPort)});
  json pod_spec = PodSpec(d, json::object(), 30);
  AddModel(d, image, pod_spec, container);
  pod_spec["containers"] = json::array({container});
  if (!d.worker.node_selector.empty()) pod_spec["nodeSelector"] = d.worker.node_selector;
  if (!d.worker.tolerations.empty()) pod_spec["tolerations"] = d.worker.tolerations;
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", Metadata(d, PipelineName(d, r), Labels(d, "worker", r))},
          {"spec",
           {{"serviceName", PipelineName(d, r)},
            {"replicas", d.pipeline},
            {"podManagementPolicy", "Parallel"},
            {"selector", {{"matchLabels", SelectorLabels(d, "worker", r)}}},
            {"template", PodTemplate(d, Labels(d, "worker", r),
                                     ConfigHash(config_data, absl::StrCat("worker-r", r, ".yaml")), pod_spec)}}}};
}

json RenderSchedulerService(const OrcaDeployment& d, int r) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(d, SchedulerName(d, r), Labels(d, "scheduler", r))},
          {"spec",
           {{"type", "ClusterIP"},
            {"selector", SelectorLabels(d, "scheduler", r)},
            {"ports", json::array({ServicePort("grpc", kSchedulerGrpcPort, "grpc"),
                                   ServicePort("http", kSchedulerHttpPort, "http")})}}}};
}

json RenderScheduler(const OrcaDeployment& d, int r, const json& config_data) {
  json container = MainContainer(d, "scheduler", ImageFor(d, d.scheduler.image), "orca-scheduler",
                                 absl::StrCat("scheduler-r", r, ".yaml"), d.scheduler.resources);
  container["ports"] = json::array({Port("grpc", kSchedulerGrpcPort), Port("http", kSchedulerHttpPort)});
  // The scheduler drains for --drain-grace-seconds (30) on SIGTERM; leave it room.
  json pod_spec = PodSpec(d, container, 45);
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", Metadata(d, SchedulerName(d, r), Labels(d, "scheduler", r))},
          {"spec",
           {{"replicas", 1},
            // Never two engine masters driving one pipeline.
            {"strategy", {{"type", "Recreate"}}},
            {"selector", {{"matchLabels", SelectorLabels(d, "scheduler", r)}}},
            {"template", PodTemplate(d, Labels(d, "scheduler", r),
                                     ConfigHash(config_data, absl::StrCat("scheduler-r", r, ".yaml")), pod_spec)}}}};
}

json RenderGatewayService(const OrcaDeployment& d) {
  json meta = Metadata(d, GatewayName(d), Labels(d, "gateway"));
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

json RenderGateway(const OrcaDeployment& d, const json& config_data) {
  const std::string image = ImageFor(d, d.gateway.image);
  json container = MainContainer(d, "gateway", image, "orca-gateway", "gateway.yaml", d.gateway.resources);
  container["ports"] = json::array({Port("http", kGatewayHttpPort), Port("grpc", kGatewayGrpcPort)});
  json pod_spec = PodSpec(d, json::object(), 30);
  AddModel(d, image, pod_spec, container);
  if (!d.gateway.api_keys_secret.empty()) {
    pod_spec["volumes"].push_back({{"name", "api-keys"}, {"secret", {{"secretName", d.gateway.api_keys_secret}}}});
    container["volumeMounts"].push_back({{"name", "api-keys"}, {"mountPath", kSecretMountPath}, {"readOnly", true}});
  }
  pod_spec["containers"] = json::array({container});
  // Without an engine replica there is nothing to route to: scale the gateway down too.
  const int replicas = d.replicas == 0 ? 0 : d.gateway.replicas;
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", Metadata(d, GatewayName(d), Labels(d, "gateway"))},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", SelectorLabels(d, "gateway")}}},
            {"template", PodTemplate(d, Labels(d, "gateway"), ConfigHash(config_data, "gateway.yaml"), pod_spec)}}}};
}

json RenderServiceMonitor(const OrcaDeployment& d) {
  json labels = Labels(d, "monitoring");
  for (const auto& [k, v] : d.monitoring.labels) labels[k] = v;
  return {
      {"apiVersion", "monitoring.coreos.com/v1"},
      {"kind", "ServiceMonitor"},
      {"metadata", Metadata(d, d.name, labels)},
      {"spec",
       {{"selector", {{"matchLabels", {{"app.kubernetes.io/instance", d.name}, {kLabelDeployment, d.name}}}}},
        {"namespaceSelector", {{"matchNames", json::array({d.namespace_})}}},
        {"endpoints", json::array({{{"port", "http"}, {"path", "/metrics"}, {"interval", d.monitoring.interval}}})}}}};
}

}  // namespace

std::string ConfigMapName(const OrcaDeployment& d) { return d.name + "-config"; }
std::string GatewayName(const OrcaDeployment& d) { return d.name + "-gateway"; }
std::string SchedulerName(const OrcaDeployment& d, int replica) {
  return absl::StrCat(d.name, "-r", replica, "-scheduler");
}
std::string PipelineName(const OrcaDeployment& d, int replica) {
  return absl::StrCat(d.name, "-r", replica, "-pipeline");
}

std::string StageAddress(const OrcaDeployment& d, int replica, int stage, const RenderOptions& o) {
  const std::string sts = PipelineName(d, replica);
  return absl::StrCat(sts, "-", stage, ".", sts, ".", d.namespace_, ".svc.", o.cluster_domain, ":", kWorkerGrpcPort);
}

std::string SchedulerAddress(const OrcaDeployment& d, int replica, const RenderOptions& o) {
  return absl::StrCat(SchedulerName(d, replica), ".", d.namespace_, ".svc.", o.cluster_domain, ":", kSchedulerGrpcPort);
}

std::string SchedulerPodSelector(const OrcaDeployment& d) {
  return absl::StrCat("app.kubernetes.io/component=scheduler,app.kubernetes.io/instance=", d.name, ",",
                      kLabelDeployment, "=", d.name);
}

std::string OwnedObjectSelector(const std::string& deployment_name) {
  return absl::StrCat(kLabelManagedBy, "=", kManagedByValue, ",", kLabelDeployment, "=", deployment_name);
}

json RenderConfigData(const OrcaDeployment& d, const RenderOptions& o) {
  json data = json::object();
  data["gateway.yaml"] = FlagFile(GatewayFlags(d, o));
  for (int r = 0; r < d.replicas; ++r) {
    data[absl::StrCat("scheduler-r", r, ".yaml")] = FlagFile(SchedulerFlags(d, r, o));
    data[absl::StrCat("worker-r", r, ".yaml")] = FlagFile(WorkerFlags(d, r, o));
  }
  return data;
}

std::vector<json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& o) {
  const json config_data = RenderConfigData(d, o);
  std::vector<json> objects;
  objects.push_back({{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", Metadata(d, ConfigMapName(d), Labels(d, "config"))},
                     {"data", config_data}});
  for (int r = 0; r < d.replicas; ++r) {
    objects.push_back(RenderPipelineService(d, r));
    objects.push_back(RenderPipeline(d, r, config_data));
    objects.push_back(RenderSchedulerService(d, r));
    objects.push_back(RenderScheduler(d, r, config_data));
  }
  objects.push_back(RenderGatewayService(d));
  objects.push_back(RenderGateway(d, config_data));
  if (d.monitoring.service_monitor) objects.push_back(RenderServiceMonitor(d));
  return objects;
}

}  // namespace orca::k8s
