// The command lines of a local stack (services/cli/local_stack_commands.h), as
// `orca serve`, the integration clusters and the pipeline benchmark start it
// (issue 45): every process gets the run's internal token as a file, never as
// a value on its command line, and the file is its owner's only.

#include "services/cli/local_stack_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/common/internal_token.h"

namespace orca::cli {
namespace {

std::vector<std::vector<std::string>> AllArgs(const LocalStackCommands& c, int stages) {
  std::vector<std::vector<std::string>> out;
  for (int s = 0; s < stages; ++s) out.push_back(c.WorkerArgs(s));
  out.push_back(c.SchedulerArgs());
  out.push_back(c.GatewayArgs());
  return out;
}

TEST(LocalStackCommandsTest, EveryProcessGetsTheInternalTokenFileAndNeverTheToken) {
  const std::string dir = ::testing::TempDir() + "/local_stack_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> file = CreateInternalTokenFile(dir);
  ASSERT_TRUE(file.ok()) << file.status();
  struct stat st;
  ASSERT_EQ(::stat(file->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto tokens = services::ReadInternalTokenFile(*file, "test");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::string token = tokens->front();
  EXPECT_EQ(token.size(), 64u);

  LocalStackCommands::Options o;
  o.model = "/m";
  o.num_stages = 2;
  o.internal_token_file = *file;
  o.gateway_listen = "127.0.0.1:1";
  auto ports = LocalStackPorts::Pick(2);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const LocalStackCommands commands(o, *ports);
  for (const auto& args : AllArgs(commands, 2)) {
    int with_file = 0;
    for (const std::string& a : args) {
      EXPECT_EQ(a.find(token), std::string::npos) << "a token on a command line: " << a;
      EXPECT_NE(a, "--insecure-internal");
      with_file += a == "--internal-token-file=" + *file;
    }
    EXPECT_EQ(with_file, 1) << args.front();
  }
  // A second file in the same place is refused rather than overwritten.
  EXPECT_FALSE(CreateInternalTokenFile(dir).ok());
  std::filesystem::remove_all(dir);
}

TEST(LocalStackCommandsTest, WithoutATokenFileEveryProcessIsToldItRunsInsecure) {
  LocalStackCommands::Options o;
  o.model = "/m";
  o.num_stages = 1;
  o.gateway_listen = "127.0.0.1:1";
  auto ports = LocalStackPorts::Pick(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const LocalStackCommands commands(o, *ports);
  for (const auto& args : AllArgs(commands, 1)) {
    EXPECT_EQ(std::count(args.begin(), args.end(), "--insecure-internal"), 1) << args.front();
  }
}

}  // namespace
}  // namespace orca::cli
