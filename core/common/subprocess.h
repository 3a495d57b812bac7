#pragma once
/// A program this process starts and owns: `orca serve`'s services, the
/// benchmarks' local stacks, the integration tests' clusters. Started with
/// fork/exec, its output optionally in a log file, reaped by Alive()/Stop(),
/// and by default killed with its parent (PR_SET_PDEATHSIG), so nothing
/// outlives a crashed or killed owner.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace orca {

class Subprocess {
 public:
  struct Options {
    std::string log_path;         ///< stdout and stderr go here; empty: inherited
    bool truncate_log = false;    ///< start the log afresh instead of appending
    bool die_with_parent = true;  ///< SIGTERM when the starting thread's process goes away
  };

  /// Starts `path` with `args` (not including argv[0]). The signal mask is
  /// cleared in the child (owners often block termination signals to wait for
  /// them) and SIGPIPE has its default action (a data-plane owner ignores it).
  /// If exec fails, the child writes why to its log and exits 127.
  Subprocess(std::string name, const std::string& path, const std::vector<std::string>& args, const Options& options);
  /// Stop(SIGTERM, 2000) if still running.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  /// False once the process has exited (reaps it).
  bool Alive();
  /// Sends `sig`, waits up to `grace_ms` for the exit, then SIGKILL. Returns
  /// the exit status: the exit code, or 128 + the signal that ended it.
  int Stop(int sig, int grace_ms);
  /// The exit status once exited, else -1.
  int exit_status() const { return status_; }
  /// True when Stop() had to SIGKILL it after the grace period.
  bool killed() const { return killed_; }

 private:
  std::string name_;
  pid_t pid_ = -1;
  int status_ = -1;
  bool killed_ = false;
};

/// Runs `argv` to completion in the foreground: argv[0] is looked up on PATH unless it
/// holds a '/', stdio is inherited. NotFound ("cannot run X: why") when it cannot start;
/// FailedPrecondition naming the command and its exit status when it fails.
absl::Status RunToCompletion(const std::vector<std::string>& argv);

/// The directory of the running executable, where Orca's sibling binaries live.
std::string ExecutableDir();

}  // namespace orca
