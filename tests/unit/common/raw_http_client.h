#pragma once
// A blocking HTTP/1.x client on one plain TCP connection to 127.0.0.1, for
// tests that need what an asio-based client cannot give: bounded waits
// (SO_RCVTIMEO is honoured by recv(2), whereas asio's synchronous reads retry
// past it), so that a broken server fails the test instead of hanging it, and
// a small receive buffer (set before connect) for clients that read slowly or
// never. The gateway's and the admin HTTP server's tests use it.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace orca::testing {

class RawHttpClient {
 public:
  struct Options {
    /// SO_RCVBUF before connect; 0: the system's default.
    int receive_buffer_bytes = 0;
    /// How long one read may wait.
    int receive_timeout_seconds = 10;
    /// How long one send may wait; 0: no limit.
    int send_timeout_seconds = 0;
    /// A failed connect fails the test; false for a test that expects it to
    /// fail and checks connected() itself.
    bool expect_connected = true;
  };
  struct Response {
    int status = 0;                              // 0: no complete response
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;                            // by Content-Length (chunked bodies stay raw)
    std::string Header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };

  explicit RawHttpClient(int port) : RawHttpClient(port, Options{}) {}
  RawHttpClient(int port, Options options) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (options.receive_buffer_bytes > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &options.receive_buffer_bytes, sizeof(options.receive_buffer_bytes));
    }
    timeval timeout{options.receive_timeout_seconds, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (options.send_timeout_seconds > 0) {
      timeval send_timeout{options.send_timeout_seconds, 0};
      setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    if (options.expect_connected) {
      EXPECT_TRUE(connected_) << "connect to 127.0.0.1:" << port;
    }
  }
  ~RawHttpClient() { close(fd_); }
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const { return connected_; }

  /// Sends all of `data`; false (and a test failure) when the socket refused.
  bool Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      EXPECT_GT(n, 0) << "send failed";
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  /// Reads one response with a Content-Length body (status 0 if none came);
  /// `head_request`: the answer to a HEAD request, which has no body whatever
  /// its Content-Length says.
  Response ReadResponse(bool head_request = false) {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return {};
    }
    Response response;
    const std::string head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return {};
    response.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      response.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
    const std::string length = response.Header("content-length");
    const size_t size = head_request || length.empty() ? 0 : std::stoul(length);
    while (buffer_.size() < size) {
      if (!Fill()) return {};
    }
    response.body = buffer_.substr(0, size);
    buffer_.erase(0, size);
    return response;
  }

  /// True when the server closed the connection (EOF or reset) with nothing
  /// more sent, within the receive timeout.
  bool ClosedByServer() {
    if (!buffer_.empty()) return false;
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    if (n > 0) buffer_.push_back(c);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

  /// Reads until a chunked response's last chunk, EOF or the receive timeout;
  /// returns everything read (the response head included).
  std::string ReadToEnd() {
    std::string seen = std::move(buffer_);
    buffer_.clear();
    char chunk[16384];
    while (seen.size() < 5 || seen.compare(seen.size() - 5, 5, "0\r\n\r\n") != 0) {
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      seen.append(chunk, static_cast<size_t>(n));
    }
    return seen;
  }

 private:
  bool Fill() {
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

}  // namespace orca::testing
