#include "core/common/subprocess.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace orca {
namespace {

int ExitStatus(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Subprocess::Subprocess(std::string name, const std::string& path, const std::vector<std::string>& args,
                       const Options& options)
    : name_(std::move(name)) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls until exec.
  std::vector<std::string> storage = {path};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string exec_failed = "cannot run " + path + ": ";
  const int log_flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.truncate_log ? O_TRUNC : O_APPEND);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ != 0) return;  // parent (or fork failed: pid_ < 0, started() is false)
  if (options.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the parent is already gone
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, nullptr);  // an ignored signal stays ignored across exec
  if (!options.log_path.empty()) {
    const int fd = ::open(options.log_path.c_str(), log_flags, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
  }
  ::execv(path.c_str(), argv.data());
  const char* why = std::strerror(errno);
  WriteAll(STDERR_FILENO, exec_failed);
  WriteAll(STDERR_FILENO, why);
  WriteAll(STDERR_FILENO, "\n");
  ::_exit(127);
}

Subprocess::~Subprocess() {
  if (Alive()) Stop(SIGTERM, 2000);
}

bool Subprocess::Alive() {
  if (pid_ <= 0 || status_ != -1) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = ExitStatus(st);
    return false;
  }
  return r == 0;
}

int Subprocess::Stop(int sig, int grace_ms) {
  if (!Alive()) return status_;
  ::kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Alive()) return status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!Alive()) return status_;
  ::kill(pid_, SIGKILL);
  killed_ = true;
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = ExitStatus(st);
  return status_;
}

absl::Status RunToCompletion(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::vector<std::string> storage = argv;
  std::vector<char*> args;
  for (std::string& a : storage) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = ::posix_spawnp(&pid, storage[0].c_str(), nullptr, nullptr, args.data(), environ); err != 0) {
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(err)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(absl::StrJoin(argv, " "), " failed (status ", ExitStatus(status), ")"));
  }
  return absl::OkStatus();
}

std::string ExecutableDir() {
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "./unknown";
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace orca
