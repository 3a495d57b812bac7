#pragma once
/// How to reach and authenticate to the Kubernetes API server: from a
/// kubeconfig file (token, client certificate/key and CA as files or inline
/// *-data) or from the in-cluster service account.

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace orca::k8s {

struct KubeConfig {
  /// https://host:port (http:// is accepted for local test servers).
  std::string server;
  /// CA bundle (PEM): a file or inline bytes; both empty = the system store.
  std::string ca_file;
  std::string ca_data;
  bool insecure_skip_tls_verify = false;
  /// Bearer token: inline, or a file re-read on every request (bound tokens rotate).
  std::string token;
  std::string token_file;
  /// Client certificate and key (PEM): files or inline bytes.
  std::string client_cert_file;
  std::string client_cert_data;
  std::string client_key_file;
  std::string client_key_data;
  /// The context's default namespace (kubeconfig) or the pod's namespace (in-cluster).
  std::string namespace_;
};

/// Parses kubeconfig YAML. `context` "" means current-context; relative file
/// paths are resolved against `base_dir`. exec/auth-provider plugins are not
/// supported and are reported as such.
absl::StatusOr<KubeConfig> ParseKubeConfig(const std::string& yaml_text, const std::string& base_dir,
                                           const std::string& context = "");

/// Reads and parses a kubeconfig file.
absl::StatusOr<KubeConfig> LoadKubeConfigFile(const std::string& path, const std::string& context = "");

/// The in-cluster configuration: KUBERNETES_SERVICE_HOST/PORT from `getenv`
/// and the token, CA and namespace files under `sa_dir`.
absl::StatusOr<KubeConfig> LoadInClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount",
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

}  // namespace orca::k8s
