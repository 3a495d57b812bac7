#include "tests/integration/process.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/ports.h"
#include "core/loadgen/http_client.h"

namespace orca::testing {

std::string BinDir() {
  // Test binaries live beside the programs they start (build/bin).
  return ExecutableDir();
}

std::string TempPath(const std::string& name) {
  const char* t = std::getenv("TMPDIR");
  return std::string(t ? t : "/tmp") + "/orca-it-" + std::to_string(::getpid()) + "-" + name;
}

Process::Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path),
      process_(std::make_unique<Subprocess>(binary, BinDir() + "/" + binary, args,
                                            Subprocess::Options{.log_path = log_path, .truncate_log = true})) {}

Process::~Process() {
  if (process_->Alive()) process_->Stop(SIGKILL, 5000);
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Process::State() {
  if (process_->Alive()) return "running";
  const int status = process_->exit_status();
  const char* signal_name = status > 128 ? sigabbrev_np(status - 128) : nullptr;
  return signal_name != nullptr ? absl::StrCat("exit status ", status, " (SIG", signal_name, ")")
                                : absl::StrCat("exit status ", status);
}

int FreePort() {
  auto port = PickLoopbackPort();
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", std::string(port.status().message()).c_str());
    std::abort();
  }
  return *port;
}

int HttpGet(int port, const std::string& path, std::string* body) {
  absl::StatusOr<loadgen::HttpResponse> response =
      loadgen::HttpGet(absl::StrCat("http://127.0.0.1:", port, path), absl::Seconds(2));
  if (!response.ok()) return 0;
  if (body != nullptr) *body = response->body;
  return static_cast<int>(response->status);
}

bool WaitReady(int http_port, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    if (HttpGet(http_port, "/ready") == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace orca::testing
