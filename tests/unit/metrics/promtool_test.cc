// Runs `promtool check metrics` (Prometheus' own parser and linter) over a
// page holding every catalog family with children and observations.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "core/metrics/orca_metrics.h"
#include "gtest/gtest.h"

namespace orca::metrics {
namespace {

std::string FindPromtool() {
  if (const char* env = std::getenv("ORCA_PROMTOOL"); env != nullptr && *env != '\0') return env;
  for (const char* path : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

struct PromtoolResult {
  int exit_code = -1;
  std::vector<std::string> lines;  // stdout and stderr, non-empty lines
};

PromtoolResult RunPromtool(const std::string& promtool, const std::string& page) {
  char path[] = "/tmp/orca_promtool_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  PromtoolResult result;
  if (fd < 0) return result;
  close(fd);
  std::ofstream(path) << page;
  const std::string command = "'" + promtool + "' check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return result;
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  std::remove(path);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) result.lines.push_back(line);
  }
  return result;
}

// A registry with every catalog family, several children each and values in
// every kind of bucket, as a running stack would expose them.
std::string FullCatalogPage(Registry* registry) {
  auto scheduler = SchedulerMetrics::Create(registry, "tiny-llama");
  auto other = SchedulerMetrics::Create(registry, "we\"ird\\name\n");
  auto stage0 = WorkerMetrics::Create(registry, "tiny-llama", 0);
  auto stage1 = WorkerMetrics::Create(registry, "tiny-llama", 1);
  auto gateway = GatewayMetrics::Create(registry, "tiny-llama");
  EXPECT_TRUE(scheduler.ok() && other.ok() && stage0.ok() && stage1.ok() && gateway.ok());
  if (!scheduler.ok() || !other.ok() || !stage0.ok() || !stage1.ok() || !gateway.ok()) return "";
  SchedulerMetrics& s = **scheduler;
  s.num_requests_running().Set(4);
  s.num_requests_waiting().Set(2);
  s.SetKvSlots(300, 8192);
  s.prompt_tokens().Increment(1234);
  s.generation_tokens().Increment(567);
  s.request_success("stop").Increment(3);
  s.request_success("length").Increment();
  for (double v : {0.0005, 0.05, 3.0, 5000.0}) s.time_to_first_token_seconds().Observe(v);
  for (double v : {0.02, 0.2, 100.0}) s.inter_token_latency_seconds().Observe(v);
  for (double v : {0.1, 9.0, 9000.0}) {
    s.e2e_request_latency_seconds().Observe(v);
    s.request_queue_time_seconds().Observe(v / 10);
    s.request_prefill_time_seconds().Observe(v / 5);
    s.request_decode_time_seconds().Observe(v / 2);
  }
  for (double v : {1.0, 17.0, 20000.0}) s.iteration_tokens().Observe(v);
  for (double v : {1.0, 16.0, 2048.0}) s.batch_size().Observe(v);
  for (double v : {0.00005, 0.01, 60.0}) s.iteration_duration_seconds().Observe(v);
  (*other)->num_requests_running().Set(1);
  (*stage0)->stage_compute_seconds().Observe(0.004);
  (*stage1)->stage_communication_seconds().Observe(0.0003);
  (*gateway)->RecordRequest("/v1/completions", "POST", 200, 2.5);
  (*gateway)->RecordRequest("/v1/chat/completions", "POST", 400, 0.002);
  (*gateway)->RecordRequest("other", "GET", 404, 0.0001);
  return registry->Serialize();
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    promtool_ = FindPromtool();
    if (promtool_.empty()) GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  }
  std::string promtool_;
};

// promtool's linter reports every name containing ':' ("reserved for
// recording rules"), while Orca deliberately follows vLLM's `orca:` scheme.
// So: on the page as served, that exact message for a catalog family is the
// only output allowed; on the same page with the prefix spelled `orca_`,
// promtool must print nothing at all and exit 0.
TEST_F(PromtoolTest, FullCatalogPageHasNoProblemsBesidesTheColonPrefix) {
  Registry registry;
  const std::string page = FullCatalogPage(&registry);
  ASSERT_FALSE(page.empty());

  const PromtoolResult served = RunPromtool(promtool_, page);
  for (const std::string& line : served.lines) {
    const size_t space = line.find(' ');
    const std::string family = line.substr(0, space);
    const bool colon_lint = space != std::string::npos &&
                            line.substr(space + 1) == "metric names should not contain ':'" &&
                            FindMetricSpec(family) != nullptr;
    EXPECT_TRUE(colon_lint) << "promtool: " << line;
  }
  // At most one such line per family (newer promtool versions may drop it).
  EXPECT_LE(served.lines.size(), std::size(kMetricCatalog));

  const std::string renamed = absl::StrReplaceAll(page, {{"orca:", "orca_"}});
  const PromtoolResult clean = RunPromtool(promtool_, renamed);
  for (const std::string& line : clean.lines) ADD_FAILURE() << "promtool: " << line;
  EXPECT_EQ(clean.exit_code, 0);
}

// The harness itself must see problems when there are some.
TEST_F(PromtoolTest, ReportsAPageThatBreaksTheConventions) {
  const std::string bad =
      "# HELP tokens Tokens.\n# TYPE tokens counter\ntokens 3\n"
      "# HELP size_total Size.\n# TYPE size_total gauge\nsize_total 1\n";
  const PromtoolResult result = RunPromtool(promtool_, bad);
  EXPECT_EQ(result.lines.size(), 2u);
  EXPECT_NE(result.exit_code, 0);
}

}  // namespace
}  // namespace orca::metrics
