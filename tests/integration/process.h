#pragma once
// Real processes on loopback for integration tests: spawn a binary from the
// build tree with its output in a log file, probe its /ready endpoint, stop it.

#include <string>
#include <vector>

namespace orca::testing {

class Process {
 public:
  /// Starts `binary` (a file in $ORCA_BINARY_DIR/bin) with `args`; output goes to `log_path`.
  Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path);
  ~Process();  // SIGKILL if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int pid() const { return pid_; }
  bool Alive();
  /// Sends `sig` and waits up to `timeout_ms` for exit; returns the exit status (or -1).
  int Stop(int sig = 15, int timeout_ms = 10000);
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

 private:
  int pid_ = -1;
  int status_ = -1;
  std::string log_path_;
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
