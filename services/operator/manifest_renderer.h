#pragma once
/// Offline rendering, the operator-less path (`orca-operator --render`, and
/// `--post-render` as a Helm post-renderer): every OrcaDeployment among a
/// stream of manifests becomes the objects the operator would apply for a
/// fresh deployment; with `keep_others`, every other manifest passes through
/// unchanged (so a chart's other objects survive the post-renderer).
///
/// The internal token: an OrcaDeployment naming its own Secret
/// (spec.scheduler.apiKeys) needs nothing more. Otherwise the operator would
/// create NAME-internal-token once; offline there is nobody to remember it,
/// so `draw_token` draws one for a Secret emitted before the workloads (apply
/// it once: a re-rendered token would differ from the one running pods read).
/// Without `draw_token` (the post-renderer, which runs again on every
/// upgrade) such an OrcaDeployment is refused, naming what to set.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/operator/renderer.h"

namespace orca::k8s {

/// Draws an internal token (services/common/internal_token.h GenerateInternalToken).
using TokenSource = std::function<absl::StatusOr<std::string>()>;

/// InvalidArgument naming the OrcaDeployment and every problem of an invalid
/// spec, or when there is no OrcaDeployment at all and `keep_others` is false,
/// or when one needs a token Secret and `draw_token` is null.
absl::StatusOr<std::vector<nlohmann::json>> RenderManifests(const std::vector<nlohmann::json>& documents,
                                                            const RenderOptions& options, bool keep_others,
                                                            const TokenSource& draw_token);

}  // namespace orca::k8s
