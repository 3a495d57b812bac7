#include "services/operator/kube_config.h"

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace orca::k8s {
namespace {

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / path).string();
}

std::string Str(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap() || !node[key] || !node[key].IsScalar()) return "";
  return node[key].as<std::string>();
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns its `field`.
std::optional<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const std::string& name,
                                    const char* field) {
  const YAML::Node items = root[list];
  if (!items || !items.IsSequence()) return std::nullopt;
  for (const YAML::Node& item : items) {
    if (Str(item, "name") == name && item[field] && item[field].IsMap()) return item[field];
  }
  return std::nullopt;
}

absl::StatusOr<std::string> Base64Field(const YAML::Node& node, const char* key) {
  const std::string encoded = Str(node, key);
  if (encoded.empty()) return std::string();
  std::string decoded;
  if (!absl::Base64Unescape(encoded, &decoded)) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", key, " is not valid base64"));
  }
  return decoded;
}

absl::StatusOr<KubeConfig> ParseKubeConfigNode(const YAML::Node& root, const std::string& base_dir,
                                               const std::string& wanted_context) {
  if (!root || !root.IsMap()) return absl::InvalidArgumentError("kubeconfig: expected a mapping");
  const std::string context_name = wanted_context.empty() ? Str(root, "current-context") : wanted_context;
  if (context_name.empty()) return absl::InvalidArgumentError("kubeconfig: no current-context and no --context given");
  const std::optional<YAML::Node> context = FindNamed(root, "contexts", context_name, "context");
  if (!context) return absl::NotFoundError(absl::StrCat("kubeconfig: context '", context_name, "' not found"));
  const std::string cluster_name = Str(*context, "cluster");
  const std::optional<YAML::Node> found_cluster = FindNamed(root, "clusters", cluster_name, "cluster");
  if (!found_cluster) return absl::NotFoundError(absl::StrCat("kubeconfig: cluster '", cluster_name, "' not found"));
  const YAML::Node& cluster = *found_cluster;
  const std::string user_name = Str(*context, "user");
  const std::optional<YAML::Node> found_user =
      user_name.empty() ? std::nullopt : FindNamed(root, "users", user_name, "user");
  if (!user_name.empty() && !found_user) {
    return absl::NotFoundError(absl::StrCat("kubeconfig: user '", user_name, "' not found"));
  }

  KubeConfig cfg;
  cfg.server = Str(cluster, "server");
  if (cfg.server.empty())
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: cluster '", cluster_name, "' has no server"));
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  cfg.ca_file = Resolve(Str(cluster, "certificate-authority"), base_dir);
  ORCA_ASSIGN_OR_RETURN(cfg.ca_data, Base64Field(cluster, "certificate-authority-data"));
  cfg.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
  cfg.namespace_ = Str(*context, "namespace");
  if (found_user) {
    const YAML::Node& user = *found_user;
    if (user["exec"] || user["auth-provider"]) {
      return absl::UnimplementedError(absl::StrCat(
          "kubeconfig: user '", user_name,
          "' uses an exec/auth-provider plugin, which orca-operator does not run; use a token or client certificate"));
    }
    cfg.token = Str(user, "token");
    cfg.token_file = Resolve(Str(user, "tokenFile"), base_dir);
    cfg.client_cert_file = Resolve(Str(user, "client-certificate"), base_dir);
    ORCA_ASSIGN_OR_RETURN(cfg.client_cert_data, Base64Field(user, "client-certificate-data"));
    cfg.client_key_file = Resolve(Str(user, "client-key"), base_dir);
    ORCA_ASSIGN_OR_RETURN(cfg.client_key_data, Base64Field(user, "client-key-data"));
  }
  return cfg;
}

}  // namespace

absl::StatusOr<KubeConfig> ParseKubeConfig(const std::string& yaml_text, const std::string& base_dir,
                                           const std::string& context) {
  try {
    return ParseKubeConfigNode(YAML::Load(yaml_text), base_dir, context);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", e.what()));
  }
}

absl::StatusOr<KubeConfig> LoadKubeConfigFile(const std::string& path, const std::string& context) {
  ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto cfg = ParseKubeConfig(text, std::filesystem::path(path).parent_path().string(), context);
  if (!cfg.ok()) return Annotate(cfg.status(), path);
  return cfg;
}

absl::StatusOr<KubeConfig> LoadInClusterConfig(const std::string& sa_dir,
                                               const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    return v ? v : "";
  };
  const std::string host = env("KUBERNETES_SERVICE_HOST");
  const std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset); pass --kubeconfig");
  }
  KubeConfig cfg;
  // IPv6 service hosts need brackets in a URL.
  cfg.server = host.find(':') != std::string::npos ? absl::StrCat("https://[", host, "]:", port)
                                                   : absl::StrCat("https://", host, ":", port);
  cfg.token_file = sa_dir + "/token";
  cfg.ca_file = sa_dir + "/ca.crt";
  if (!std::filesystem::exists(cfg.token_file)) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster: ", cfg.token_file, " is missing (automountServiceAccountToken off?)"));
  }
  auto ns = ReadFileToString(sa_dir + "/namespace");
  if (ns.ok()) {
    cfg.namespace_ = *ns;
    while (!cfg.namespace_.empty() && isspace(static_cast<unsigned char>(cfg.namespace_.back())))
      cfg.namespace_.pop_back();
  }
  return cfg;
}

}  // namespace orca::k8s
