#pragma once
// Real processes on loopback for integration tests: spawn a binary from the
// build tree with its output in a log file, probe its /ready endpoint, stop it.

#include <memory>
#include <string>
#include <vector>

#include "core/common/subprocess.h"

namespace orca::testing {

class Process {
 public:
  /// Starts `binary` (a file in $ORCA_BINARY_DIR/bin) with `args`; output goes to `log_path`.
  Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path);
  ~Process();  // SIGKILL if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int pid() const { return process_->pid(); }
  bool Alive() { return process_->Alive(); }
  /// Sends `sig` and waits up to `timeout_ms` for exit (then SIGKILL); returns the exit status.
  int Stop(int sig = 15, int timeout_ms = 10000) { return process_->Stop(sig, timeout_ms); }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;
  /// "running", or how it ended: "exit status 1", "exit status 141 (SIGPIPE)". Reaps it.
  std::string State();

 private:
  std::string log_path_;
  std::unique_ptr<Subprocess> process_;
};

/// A TCP port on 127.0.0.1 free right now.
int FreePort();
/// GET http://127.0.0.1:port/path; returns the status code (0 if unreachable) and the body.
int HttpGet(int port, const std::string& path, std::string* body = nullptr);
/// Polls /ready until 200 or the timeout; false on timeout.
bool WaitReady(int http_port, int timeout_ms);
std::string BinDir();
std::string TempPath(const std::string& name);

}  // namespace orca::testing
