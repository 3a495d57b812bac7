#include "services/operator/json_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "services/operator/kube_config.h"
#include "services/operator/quantity.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(JsonYamlTest, PlainScalarsResolveLikeYaml12AndQuotedOnesStayStrings) {
  auto docs = ParseYamlDocuments(
      "a: 1\nb: \"1\"\nc: true\nd: 'true'\ne: null\nf: 1.5\ng: 0.1.0\nh: ~\ni: -7\nj: [x, 2]\n---\n---\nk: v\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);  // the empty document is skipped
  const json& d = (*docs)[0];
  EXPECT_EQ(d["a"], 1);
  EXPECT_EQ(d["b"], "1");
  EXPECT_EQ(d["c"], true);
  EXPECT_EQ(d["d"], "true");
  EXPECT_TRUE(d["e"].is_null());
  EXPECT_EQ(d["f"], 1.5);
  EXPECT_EQ(d["g"], "0.1.0");
  EXPECT_TRUE(d["h"].is_null());
  EXPECT_EQ(d["i"], -7);
  EXPECT_EQ(d["j"], json::array({"x", 2}));
  EXPECT_EQ((*docs)[1]["k"], "v");
}

TEST(JsonYamlTest, ToYamlRoundTrips) {
  const json value = {{"name", "x"},
                      {"on", "yes"},
                      {"n", 3},
                      {"ratio", 0.5},
                      {"flag", false},
                      {"text", "line1\nline2: \"q\""},
                      {"empty", json::object()},
                      {"none", json::array()},
                      {"list", json::array({{{"a", 1}, {"b", json::array({1, 2})}}, "s", json::array({"x"})})},
                      {"nested", {{"k.io/x", "true"}, {"null", nullptr}}}};
  auto back = ParseYamlDocuments(ToYaml(value));
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << ToYaml(value);
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0], value) << ToYaml(value);
}

TEST(JsonYamlTest, BadInputIsAnErrorNotACrash) {
  EXPECT_FALSE(ParseYamlDocuments("a: [1, 2\n").ok());
  EXPECT_FALSE(ParseJson("{\"a\":").ok());
  EXPECT_THAT(std::string(ParseJson("nope").status().message()), HasSubstr("invalid JSON"));
}

TEST(QuantityTest, ParsesBinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseQuantity(json("4Gi"), "f"), int64_t{4} << 30);
  EXPECT_EQ(*ParseQuantity(json("512Mi"), "f"), int64_t{512} << 20);
  EXPECT_EQ(*ParseQuantity(json("1.5Ki"), "f"), 1536);
  EXPECT_EQ(*ParseQuantity(json("2G"), "f"), 2000000000);
  EXPECT_EQ(*ParseQuantity(json("500m"), "f"), 1);  // rounded up
  EXPECT_EQ(*ParseQuantity(json(1024), "f"), 1024);
  EXPECT_EQ(*ParseQuantity(json("7"), "f"), 7);
  EXPECT_THAT(std::string(ParseQuantity(json("4GB"), "spec.x").status().message()),
              HasSubstr("spec.x: '4GB' is not a quantity"));
  EXPECT_FALSE(ParseQuantity(json(-1), "f").ok());
  EXPECT_FALSE(ParseQuantity(json(true), "f").ok());
  EXPECT_FALSE(ParseQuantity(json("100Ei"), "f").ok());
}

TEST(KubeConfigTest, ReadsTheCurrentContextWithInlineCredentials) {
  const std::string yaml = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: Q0EtUEVN
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
- name: prod
  context: {cluster: c1, user: u2}
users:
- name: u1
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: u2
  user:
    token: s3cr3t
)";
  auto cfg = ParseKubeConfig(yaml, "/home/me/.kube");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->ca_data, "CA-PEM");
  EXPECT_EQ(cfg->client_cert_data, "CERT");
  EXPECT_EQ(cfg->client_key_data, "KEY");
  EXPECT_EQ(cfg->namespace_, "team-a");
  auto prod = ParseKubeConfig(yaml, "/home/me/.kube", "prod");
  ASSERT_TRUE(prod.ok());
  EXPECT_EQ(prod->token, "s3cr3t");
  EXPECT_EQ(ParseKubeConfig(yaml, "", "nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(KubeConfigTest, RelativeFilesResolveAgainstTheKubeconfigDirectory) {
  auto cfg = ParseKubeConfig(R"(
current-context: k
clusters: [{name: c, cluster: {server: "https://x", certificate-authority: ca.crt}}]
contexts: [{name: k, context: {cluster: c, user: u}}]
users: [{name: u, user: {client-certificate: certs/me.crt, client-key: /abs/me.key, tokenFile: tok}}]
)",
                             "/etc/kube");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->ca_file, "/etc/kube/ca.crt");
  EXPECT_EQ(cfg->client_cert_file, "/etc/kube/certs/me.crt");
  EXPECT_EQ(cfg->client_key_file, "/abs/me.key");
  EXPECT_EQ(cfg->token_file, "/etc/kube/tok");
}

TEST(KubeConfigTest, ExecPluginsAndBrokenFilesAreReported) {
  auto exec = ParseKubeConfig(R"(
current-context: k
clusters: [{name: c, cluster: {server: "https://x"}}]
contexts: [{name: k, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {command: aws}}}]
)",
                              "");
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(exec.status().message()), HasSubstr("exec/auth-provider plugin"));
  EXPECT_FALSE(ParseKubeConfig("current-context: [", "").ok());
  EXPECT_FALSE(ParseKubeConfig("current-context: k\n", "").ok());
  EXPECT_FALSE(ParseKubeConfig(R"(
current-context: k
clusters: [{name: c, cluster: {server: "https://x", certificate-authority-data: "%%%"}}]
contexts: [{name: k, context: {cluster: c}}]
)",
                               "")
                   .ok());
}

TEST(KubeConfigTest, InClusterNeedsTheServiceEnvironment) {
  auto none = LoadInClusterConfig("/nonexistent", [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  auto env = [](const char* name) -> const char* {
    if (std::string(name) == "KUBERNETES_SERVICE_HOST") return "fd00::1";
    if (std::string(name) == "KUBERNETES_SERVICE_PORT") return "443";
    return nullptr;
  };
  auto missing_token = LoadInClusterConfig("/nonexistent", env);
  EXPECT_THAT(std::string(missing_token.status().message()), HasSubstr("/nonexistent/token is missing"));
  const std::string dir = ::testing::TempDir() + "/sa";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << "tok\n";
  std::ofstream(dir + "/namespace") << "orca-system\n";
  auto cfg = LoadInClusterConfig(dir, env);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, "https://[fd00::1]:443");
  EXPECT_EQ(cfg->namespace_, "orca-system");
  EXPECT_EQ(cfg->token_file, dir + "/token");
  EXPECT_EQ(cfg->ca_file, dir + "/ca.crt");
}

}  // namespace
}  // namespace orca::k8s
