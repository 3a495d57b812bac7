#pragma once
/// Building blocks of the pod templates the renderer emits: labels, metadata
/// with the owner reference, the restricted security contexts, probes, the
/// main container reading its flag file, the model volume (and the init
/// container that synthesizes a demo checkpoint), the internal token's
/// Secret volume, flag files. Pure functions.

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "services/operator/orca_deployment_spec.h"

namespace orca::k8s {

/// `flag-name: value` pairs of a --config file, in order.
using FlagList = std::vector<std::pair<std::string, nlohmann::json>>;

/// Where the flag files and the API-key Secret are mounted.
inline constexpr char kConfigMountPath[] = "/etc/orca";
inline constexpr char kSecretMountPath[] = "/etc/orca-secrets";
/// Where the internal token's Secret is mounted in scheduler, worker and gateway pods: its key is
/// projected as the file kInternalTokenFile (--internal-token-file). Not under kSecretMountPath: a
/// mount point inside another Secret volume would have to be created in a read-only tmpfs.
inline constexpr char kInternalTokenMountPath[] = "/etc/orca-internal-auth";
inline constexpr char kInternalTokenFile[] = "token";
/// The key of the Secret the operator creates (InternalTokenSecretName in renderer.h).
inline constexpr char kInternalTokenSecretKey[] = "token";

/// 16 hex digits of FNV-1a over `text`.
std::string Fnv1aHex(const std::string& text);

/// A flag file for --config: one `flag-name: value` line each, values as JSON scalars (valid YAML).
std::string FlagFile(const FlagList& flags);

/// The app.kubernetes.io/* and serving.orca.dev/* labels of an object; `replica` < 0 and
/// an empty `revision` leave those labels out.
nlohmann::json Labels(const OrcaDeployment& d, const std::string& component, int replica = -1,
                      const std::string& revision = "");
/// The stable subset used in selectors (selectors are immutable on workloads).
nlohmann::json SelectorLabels(const OrcaDeployment& d, const std::string& component, int replica = -1,
                              const std::string& revision = "");
/// name, namespace, labels and (when `d` has a uid) the controller owner reference.
nlohmann::json Metadata(const OrcaDeployment& d, const std::string& name, nlohmann::json labels);

nlohmann::json ContainerPort(const std::string& name, int port);
nlohmann::json ServicePort(const std::string& name, int port, const std::string& target);

/// The component's main container: `binary --config=/etc/orca/<config_file> <extra args>`,
/// restricted security context, /ready and /health probes on the `http` port.
nlohmann::json MainContainer(const OrcaDeployment& d, const std::string& name, const std::string& image,
                             const std::string& binary, const std::string& config_file,
                             const ResourceRequirements& resources, const ContainerExtras& extras);

/// A restricted pod spec with `container`, the flag-file ConfigMap `config_map` and /tmp.
nlohmann::json PodSpec(const OrcaDeployment& d, nlohmann::json container, const std::string& config_map,
                       int grace_seconds);

/// Adds the model volume (and the synthesizing init container) to a pod that loads the model.
void AddModel(const OrcaDeployment& d, const std::string& image, nlohmann::json& pod_spec, nlohmann::json& container);

/// The file holding the internal token inside a pod (kInternalTokenMountPath/kInternalTokenFile).
std::string InternalTokenPath();

/// The Secret holding the OrcaDeployment's internal token: spec.scheduler.apiKeys when given,
/// else the one the operator creates, NAME-internal-token (key kInternalTokenSecretKey).
SecretKeyRef InternalTokenSecretRef(const OrcaDeployment& d);

/// Mounts the internal token's Secret key read-only as InternalTokenPath() (a file, never an env
/// var or an argument: the processes read it with --internal-token-file).
void AddInternalToken(const OrcaDeployment& d, nlohmann::json& pod_spec, nlohmann::json& container);

/// A preStop hook that keeps the container running `seconds` after Kubernetes decided to stop it
/// (before SIGTERM); the pod's terminationGracePeriodSeconds counts it.
void AddPreStopSleep(int seconds, nlohmann::json& container);

/// Appends the user's env entries to the container's env.
void AddEnv(const ContainerExtras& extras, nlohmann::json& container);

}  // namespace orca::k8s
