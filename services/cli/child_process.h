#pragma once
// Child processes of `orca serve`: started with fork/exec, killed with their
// parent (PR_SET_PDEATHSIG), output optionally redirected to a log file.

#include <string>
#include <vector>

namespace orca::cli {

class ChildProcess {
 public:
  /// Starts `path` with `args`. Empty `log_path` inherits stdout/stderr.
  ChildProcess(std::string name, const std::string& path, const std::vector<std::string>& args,
               const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& name() const { return name_; }
  bool started() const { return pid_ > 0; }
  /// False once the process has exited (reaps it).
  bool Alive();
  /// SIGTERM, then SIGKILL after `grace_ms`. Returns the exit status (128+signal when killed).
  int Stop(int grace_ms);
  int exit_status() const { return status_; }

 private:
  std::string name_;
  int pid_ = -1;
  int status_ = -1;
};

/// Directory of the running executable (sibling binaries live there).
std::string ExecutableDir();
/// GET http://host:port/path with a short timeout; returns the HTTP status (0 when unreachable).
int HttpStatus(const std::string& host, int port, const std::string& path);

}  // namespace orca::cli
