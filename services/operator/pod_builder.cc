#include "services/operator/pod_builder.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "services/operator/renderer.h"

namespace orca::k8s {

using nlohmann::json;

namespace {

constexpr int64_t kNonRootUid = 65532;  // the image's "orca" user

json ContainerSecurityContext() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"runAsNonRoot", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

json HttpProbe(const std::string& path, int period, int failures) {
  return {{"httpGet", {{"path", path}, {"port", "http"}}}, {"periodSeconds", period}, {"failureThreshold", failures}};
}

}  // namespace

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

std::string FlagFile(const FlagList& flags) {
  std::string out;
  for (const auto& [key, value] : flags) absl::StrAppend(&out, key, ": ", value.dump(), "\n");
  return out;
}

json Labels(const OrcaDeployment& d, const std::string& component, int replica, const std::string& revision) {
  json labels = {
      {"app.kubernetes.io/name", "orca"},    {"app.kubernetes.io/instance", d.name}, {kLabelComponent, component},
      {"app.kubernetes.io/part-of", "orca"}, {kLabelManagedBy, kManagedByValue},     {kLabelDeployment, d.name},
  };
  if (replica >= 0) labels[kLabelReplica] = std::to_string(replica);
  if (!revision.empty()) labels[kLabelRevision] = revision;
  return labels;
}

json SelectorLabels(const OrcaDeployment& d, const std::string& component, int replica, const std::string& revision) {
  json labels = {{"app.kubernetes.io/instance", d.name}, {kLabelComponent, component}, {kLabelDeployment, d.name}};
  if (replica >= 0) labels[kLabelReplica] = std::to_string(replica);
  if (!revision.empty()) labels[kLabelRevision] = revision;
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

json ContainerPort(const std::string& name, int port) {
  return {{"name", name}, {"containerPort", port}, {"protocol", "TCP"}};
}

json ServicePort(const std::string& name, int port, const std::string& target) {
  return {{"name", name}, {"port", port}, {"targetPort", target}, {"protocol", "TCP"}};
}

json MainContainer(const OrcaDeployment& d, const std::string& name, const std::string& image,
                   const std::string& binary, const std::string& config_file, const ResourceRequirements& resources,
                   const ContainerExtras& extras) {
  json args = json::array({absl::StrCat("--config=", kConfigMountPath, "/", config_file)});
  for (const std::string& a : extras.args) args.push_back(a);
  json c = {
      {"name", name},
      {"image", image},
      {"imagePullPolicy", d.image.pull_policy},
      {"command", json::array({binary})},
      {"args", args},
      {"securityContext", ContainerSecurityContext()},
      {"volumeMounts", json::array({{{"name", "config"}, {"mountPath", kConfigMountPath}, {"readOnly", true}},
                                    {{"name", "tmp"}, {"mountPath", "/tmp"}}})},
      {"readinessProbe", HttpProbe("/ready", 5, 3)},
      {"livenessProbe", HttpProbe("/health", 10, 3)},
  };
  json res = json::object();
  if (!resources.limits.empty()) res["limits"] = resources.limits;
  if (!resources.requests.empty()) res["requests"] = resources.requests;
  if (!res.empty()) c["resources"] = res;
  return c;
}

std::string InternalTokenPath() { return absl::StrCat(kInternalTokenMountPath, "/", kInternalTokenFile); }

SecretKeyRef InternalTokenSecretRef(const OrcaDeployment& d) {
  if (d.scheduler.api_keys.enabled()) return d.scheduler.api_keys;
  return SecretKeyRef{absl::StrCat(d.name, "-internal-token"), kInternalTokenSecretKey};
}

void AddInternalToken(const OrcaDeployment& d, json& pod_spec, json& container) {
  const SecretKeyRef ref = InternalTokenSecretRef(d);
  // Only that key, readable by the pod's group (fsGroup) and nobody else.
  pod_spec["volumes"].push_back({{"name", "internal-token"},
                                 {"secret",
                                  {{"secretName", ref.secret_name},
                                   {"items", json::array({{{"key", ref.key}, {"path", kInternalTokenFile}}})},
                                   {"defaultMode", 0440}}}});
  container["volumeMounts"].push_back(
      {{"name", "internal-token"}, {"mountPath", kInternalTokenMountPath}, {"readOnly", true}});
}

void AddPreStopSleep(int seconds, json& container) {
  if (seconds <= 0) return;
  // exec of the image's own sleep (coreutils in the Debian runtime image), which every cluster
  // version runs; the built-in `sleep` handler needs Kubernetes 1.30.
  container["lifecycle"] = {{"preStop", {{"exec", {{"command", json::array({"sleep", std::to_string(seconds)})}}}}}};
}

void AddEnv(const ContainerExtras& extras, json& container) {
  if (extras.env.empty()) return;
  if (!container.contains("env")) container["env"] = json::array();
  for (const json& e : extras.env) container["env"].push_back(e);
}

json PodSpec(const OrcaDeployment& d, json container, const std::string& config_map, int grace_seconds) {
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
      {"volumes", json::array({{{"name", "config"}, {"configMap", {{"name", config_map}}}},
                               {{"name", "tmp"}, {"emptyDir", json::object()}}})},
  };
  if (!d.image.pull_secrets.empty()) {
    spec["imagePullSecrets"] = json::array();
    for (const auto& s : d.image.pull_secrets) spec["imagePullSecrets"].push_back({{"name", s}});
  }
  return spec;
}

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

}  // namespace orca::k8s
