#pragma once
/// Offline rendering, the operator-less path (`orca-operator --render`, and
/// `--post-render` as a Helm post-renderer): every OrcaDeployment among a
/// stream of manifests becomes the objects the operator would apply for a
/// fresh deployment; with `keep_others`, every other manifest passes through
/// unchanged (so a chart's other objects survive the post-renderer).

#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/operator/renderer.h"

namespace orca::k8s {

/// InvalidArgument naming the OrcaDeployment and every problem of an invalid
/// spec, or when there is no OrcaDeployment at all and `keep_others` is false.
absl::StatusOr<std::vector<nlohmann::json>> RenderManifests(const std::vector<nlohmann::json>& documents,
                                                            const RenderOptions& options, bool keep_others);

}  // namespace orca::k8s
