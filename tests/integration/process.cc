#include "tests/integration/process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/common/ports.h"

namespace orca::testing {

std::string BinDir() {
  // Test binaries live beside the programs they start (build/bin).
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string path(exe, static_cast<size_t>(n));
    return path.substr(0, path.find_last_of('/'));
  }
  const char* b = std::getenv("ORCA_BINARY_DIR");
  return std::string(b ? b : ".") + "/bin";
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

int FreePort() {
  auto port = PickLoopbackPort();
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", std::string(port.status().message()).c_str());
    std::abort();
  }
  return *port;
}

int HttpGet(int port, const std::string& path, std::string* body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return 0;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) < 0) {
    close(fd);
    return 0;
  }
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  int code = 0;
  if (resp.rfind("HTTP/1.", 0) == 0 && resp.size() > 12) code = std::atoi(resp.c_str() + 9);
  if (body) {
    const size_t p = resp.find("\r\n\r\n");
    *body = p == std::string::npos ? "" : resp.substr(p + 4);
  }
  return code;
}

bool WaitReady(int http_port, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    if (HttpGet(http_port, "/ready") == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace orca::testing
