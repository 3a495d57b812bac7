#include "core/common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace orca {
namespace {

std::string TempLog(const std::string& name) {
  return ::testing::TempDir() + "/subprocess-" + std::to_string(::getpid()) + "-" + name + ".log";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int WaitExit(Subprocess& p) {
  for (int i = 0; i < 500 && p.Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return p.exit_status();
}

TEST(SubprocessTest, RunsWithOutputInItsLogAndReportsTheExitCode) {
  const std::string log = TempLog("exit");
  std::ofstream(log) << "old line\n";
  Subprocess p("sh", "/bin/sh", {"-c", "echo to-stdout; echo to-stderr >&2; exit 3"}, {.log_path = log});
  ASSERT_TRUE(p.started());
  EXPECT_EQ(WaitExit(p), 3);
  EXPECT_FALSE(p.Alive());
  EXPECT_EQ(Read(log), "old line\nto-stdout\nto-stderr\n");  // appended by default
  Subprocess q("sh", "/bin/sh", {"-c", "echo fresh"}, {.log_path = log, .truncate_log = true});
  EXPECT_EQ(WaitExit(q), 0);
  EXPECT_EQ(Read(log), "fresh\n");
  std::remove(log.c_str());
}

TEST(SubprocessTest, StopEndsItWithTheSignalAndKillsOnlyAfterTheGracePeriod) {
  Subprocess polite("sleep", "/bin/sleep", {"30"}, {});
  ASSERT_TRUE(polite.Alive());
  EXPECT_EQ(polite.Stop(SIGTERM, 5000), 128 + SIGTERM);
  EXPECT_FALSE(polite.killed());

  // Ignores SIGTERM: killed once the grace period is over.
  const std::string log = TempLog("stubborn");
  Subprocess stubborn("sh", "/bin/sh", {"-c", "trap '' TERM; echo ready; while :; do sleep 1; done"},
                      {.log_path = log, .truncate_log = true});
  for (int i = 0; i < 500 && Read(log).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(stubborn.Stop(SIGTERM, 300), 128 + SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_TRUE(stubborn.killed());
  EXPECT_FALSE(stubborn.Alive());
  EXPECT_EQ(stubborn.Stop(SIGTERM, 300), 128 + SIGKILL);  // already reaped: same status
  std::remove(log.c_str());
}

TEST(SubprocessTest, AProgramThatCannotRunExits127AndSaysWhy) {
  const std::string log = TempLog("missing");
  Subprocess p("missing", "/nonexistent/orca-nothing", {}, {.log_path = log, .truncate_log = true});
  EXPECT_EQ(WaitExit(p), 127);
  EXPECT_NE(Read(log).find("cannot run /nonexistent/orca-nothing"), std::string::npos) << Read(log);
  std::remove(log.c_str());
}

}  // namespace
}  // namespace orca
