// Runs the real orca-operator binary against the in-test API server: kubeconfig
// loading, leader election, the controller, the admin endpoints, and a clean
// SIGTERM shutdown that releases the Lease.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/common/ports.h"
#include "tests/unit/operator/orca_deployment_builder.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::Eventually;
using testing::FakeKubeApiServer;
using ::testing::HasSubstr;
using testing::HttpGet;
using testing::OrcaDeploymentBuilder;

constexpr char kCrPath[] = "/apis/serving.orca.dev/v1alpha1/namespaces/team-a/orcadeployments/demo";
constexpr char kLeasePath[] = "/apis/coordination.k8s.io/v1/namespaces/orca-system/leases/orca-operator-leader";

int FreePort() {
  auto port = PickLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.value_or(0);
}

TEST(OperatorBinaryTest, ReconcilesAsLeaderAndReleasesTheLeaseOnSigterm) {
  const char* bin_dir = std::getenv("ORCA_BINARY_DIR");
  ASSERT_NE(bin_dir, nullptr) << "ORCA_BINARY_DIR must point at the build tree (set by CTest)";
  const std::string binary = std::string(bin_dir) + "/bin/orca-operator";
  ASSERT_EQ(::access(binary.c_str(), X_OK), 0) << binary << " is not built";

  auto server = FakeKubeApiServer::Start();
  json cr = OrcaDeploymentBuilder().Build();
  cr["metadata"].erase("uid");
  cr["metadata"].erase("generation");
  server->Upsert(cr);

  const std::string kubeconfig = ::testing::TempDir() + "/operator-binary-kubeconfig.yaml";
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                            << "clusters: [{name: fake, cluster: {server: \"" << server->url() << "\"}}]\n"
                            << "contexts: [{name: test, context: {cluster: fake, user: op}}]\n"
                            << "users: [{name: op, user: {token: t0k3n}}]\n";
  const int port = FreePort();
  const std::string listen = absl::StrCat("--http-listen=127.0.0.1:", port);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("POD_NAME", "orca-operator-test-0", 1);
    execl(binary.c_str(), binary.c_str(), "--kubeconfig", kubeconfig.c_str(), listen.c_str(),
          "--leader-election-namespace=orca-system", "--log-level=warning", static_cast<char*>(nullptr));
    _exit(127);
  }

  EXPECT_TRUE(Eventually([&] {
    auto obj = server->Get(kCrPath);
    return obj && obj->contains("status") && (*obj)["status"].value("observedGeneration", 0) == 1;
  })) << "the operator never wrote the status";
  EXPECT_EQ(server->List("/apis/apps/v1/namespaces/team-a/statefulsets").size(), 2u);  // replica 0's group
  ASSERT_TRUE(server->Get(kLeasePath).has_value());
  EXPECT_EQ((*server->Get(kLeasePath))["spec"]["holderIdentity"], "orca-operator-test-0");
  long code = 0;
  EXPECT_TRUE(Eventually([&] {
    HttpGet(port, "/readyz", &code);
    return code == 200;
  }));
  HttpGet(port, "/healthz", &code);
  EXPECT_EQ(code, 200);
  EXPECT_THAT(HttpGet(port, "/metrics", &code), HasSubstr("orca:operator_is_leader 1\n"));
  for (const auto& r : server->Requests()) {
    EXPECT_EQ(r.authorization, "Bearer t0k3n") << r.method << " " << r.path;  // the kubeconfig's token
  }

  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ((*server->Get(kLeasePath))["spec"]["holderIdentity"], "");  // released for the next replica
}

}  // namespace
}  // namespace orca::k8s
