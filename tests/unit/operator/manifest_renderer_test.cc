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

TEST(ManifestRendererTest, PostRenderReplacesOrcaDeploymentsAndKeepsTheRest) {
  const json cr = OrcaDeploymentBuilder().NoUid().Build();
  auto out = RenderManifests({kConfigMap, cr}, RenderOptions{}, /*keep_others=*/true);
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
  auto out = RenderManifests({kConfigMap, OrcaDeploymentBuilder().Build()}, RenderOptions{}, false);
  ASSERT_TRUE(out.ok());
  for (const json& o : *out) EXPECT_NE(o["metadata"]["name"], "other");
  auto none = RenderManifests({kConfigMap}, RenderOptions{}, false);
  EXPECT_THAT(none.status().message(), HasSubstr("no OrcaDeployment found"));
  EXPECT_TRUE(RenderManifests({kConfigMap}, RenderOptions{}, true).ok());
}

TEST(ManifestRendererTest, InvalidSpecNamesTheObjectAndTheField) {
  auto out = RenderManifests({OrcaDeploymentBuilder("chat", "ns1").Pipeline(0).Build()}, RenderOptions{}, true);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("OrcaDeployment ns1/chat: spec.parallelism.pipeline"));
}

}  // namespace
}  // namespace orca::k8s
