#include "services/cli/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace orca::cli {

ChildProcess::ChildProcess(std::string name, const std::string& path, const std::vector<std::string>& args,
                           const std::string& log_path)
    : name_(std::move(name)) {
  std::vector<std::string> storage = {path};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive `orca serve`
    if (getppid() != parent) _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent blocks termination signals
    if (!log_path.empty()) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(path.c_str(), argv.data());
    std::fprintf(stderr, "orca serve: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (Alive()) Stop(2000);
}

bool ChildProcess::Alive() {
  if (pid_ <= 0 || status_ != -1) return false;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return r == 0;
}

int ChildProcess::Stop(int grace_ms) {
  if (!Alive()) return status_;
  kill(pid_, SIGTERM);
  for (int waited = 0; waited < grace_ms; waited += 20) {
    if (!Alive()) return status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  status_ = 128 + SIGKILL;
  return status_;
}

std::string ExecutableDir() {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : ".";
  return path.substr(0, path.find_last_of('/'));
}

int HttpStatus(const std::string& host, int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return 0;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return 0;
  }
  char buf[64] = {};
  const ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  close(fd);
  if (n < 12 || std::strncmp(buf, "HTTP/1.", 7) != 0) return 0;
  return std::atoi(buf + 9);
}

}  // namespace orca::cli
