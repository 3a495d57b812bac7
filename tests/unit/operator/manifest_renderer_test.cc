#include "services/operator/manifest_renderer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/operator/orca_deployment_builder.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::OrcaDeploymentBuilder;

const json kConfigMap = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "other"}}}};
constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
const TokenSource kFixedToken = [] { return absl::StatusOr<std::string>(kToken); };
// An OrcaDeployment with its own internal-token Secret: what the post-renderer can render.
OrcaDeploymentBuilder OwnSecret(OrcaDeploymentBuilder b = OrcaDeploymentBuilder()) {
  return b.Set("/spec/scheduler/apiKeys", {{"secretName", "mine"}});
}

TEST(ManifestRendererTest, PostRenderReplacesOrcaDeploymentsAndKeepsTheRest) {
  const json cr = OwnSecret(OrcaDeploymentBuilder().NoUid()).Build();
  auto out = RenderManifests({kConfigMap, cr}, RenderOptions{}, /*keep_others=*/true, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  auto d = ParseOrcaDeployment(cr);
  ASSERT_TRUE(d.ok());
  const std::vector<json> objects = RenderDesiredObjects(*d, RenderOptions{});
  ASSERT_EQ(out->size(), objects.size() + 1);
  EXPECT_EQ((*out)[0], kConfigMap);
  for (size_t i = 0; i < objects.size(); ++i) EXPECT_EQ((*out)[i + 1], objects[i]);
  for (const json& o : *out) EXPECT_NE(o["kind"], "OrcaDeployment");
}

TEST(ManifestRendererTest, RenderDropsOtherKindsAndNeedsAnOrcaDeployment) {
  auto out = RenderManifests({kConfigMap, OrcaDeploymentBuilder().Build()}, RenderOptions{}, false, kFixedToken);
  ASSERT_TRUE(out.ok());
  for (const json& o : *out) EXPECT_NE(o["metadata"]["name"], "other");
  auto none = RenderManifests({kConfigMap}, RenderOptions{}, false, kFixedToken);
  EXPECT_THAT(none.status().message(), HasSubstr("no OrcaDeployment found"));
  EXPECT_TRUE(RenderManifests({kConfigMap}, RenderOptions{}, true, nullptr).ok());
}

TEST(ManifestRendererTest, InvalidSpecNamesTheObjectAndTheField) {
  auto out =
      RenderManifests({OrcaDeploymentBuilder("chat", "ns1").Pipeline(0).Build()}, RenderOptions{}, true, kFixedToken);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("OrcaDeployment ns1/chat: spec.parallelism.pipeline"));
}

// Issue 45: offline there is no operator to create the internal token's Secret once. --render
// emits it (with a drawn token) before the workloads that mount it; the post-renderer, which
// runs again on every upgrade, refuses a deployment without a Secret of its own.
TEST(ManifestRendererTest, RenderEmitsTheInternalTokenSecretAndThePostRendererWantsAnOwnOne) {
  const json cr = OrcaDeploymentBuilder("chat", "ns1").Build();
  auto out = RenderManifests({cr}, RenderOptions{}, false, kFixedToken);
  ASSERT_TRUE(out.ok()) << out.status();
  auto d = ParseOrcaDeployment(cr);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(out->size(), RenderDesiredObjects(*d, RenderOptions{}).size() + 1);
  EXPECT_EQ((*out)[0], RenderInternalTokenSecret(*d, kToken));
  EXPECT_EQ((*out)[0]["metadata"]["name"], "chat-internal-token");

  auto refused = RenderManifests({cr}, RenderOptions{}, true, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("OrcaDeployment ns1/chat: the internal token needs a Secret"));
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.scheduler.apiKeys"));

  auto own = RenderManifests({OwnSecret(OrcaDeploymentBuilder("chat", "ns1")).Build()}, RenderOptions{}, true, nullptr);
  ASSERT_TRUE(own.ok()) << own.status();
  for (const json& o : *own) EXPECT_NE(o["kind"], "Secret");
}

}  // namespace
}  // namespace orca::k8s
