#include "services/operator/manifest_renderer.h"

#include "absl/strings/str_cat.h"

namespace orca::k8s {

using nlohmann::json;

absl::StatusOr<std::vector<json>> RenderManifests(const std::vector<json>& documents, const RenderOptions& options,
                                                  bool keep_others, const TokenSource& draw_token) {
  std::vector<json> out;
  int deployments = 0;
  for (const json& doc : documents) {
    if (!doc.is_object() || doc.value("apiVersion", "") != kApiVersion || doc.value("kind", "") != kKind) {
      if (keep_others && doc.is_object()) out.push_back(doc);
      continue;
    }
    ++deployments;
    auto parsed = ParseOrcaDeployment(doc);
    if (!parsed.ok()) {
      const json meta = doc.value("metadata", json::object());
      return absl::InvalidArgumentError(absl::StrCat("OrcaDeployment ", meta.value("namespace", "default"), "/",
                                                     meta.value("name", "?"), ": ", parsed.status().message()));
    }
    if (!parsed->scheduler.api_keys.enabled()) {
      if (!draw_token) {
        return absl::InvalidArgumentError(absl::StrCat(
            "OrcaDeployment ", parsed->namespace_, "/", parsed->name,
            ": the internal token needs a Secret that outlives this rendering (the post-renderer runs again on "
            "every upgrade, and a token drawn here would change under running pods): set spec.scheduler.apiKeys "
            "to a Secret of yours, or the chart's orcaDeployment.schedulerApiKey.generate=true"));
      }
      absl::StatusOr<std::string> token = draw_token();
      if (!token.ok()) return token.status();
      out.push_back(RenderInternalTokenSecret(*parsed, *token));
    }
    for (json& object : RenderDesiredObjects(*parsed, options)) out.push_back(std::move(object));
  }
  if (deployments == 0 && !keep_others) return absl::InvalidArgumentError("no OrcaDeployment found");
  return out;
}

}  // namespace orca::k8s
