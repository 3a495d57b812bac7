#include "tests/unit/loadgen/fake_openai_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orca::loadgen::testing {
namespace {

using json = nlohmann::json;

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

/// Sends `payload` as HTTP/1.1 chunks of at most `piece` bytes, so SSE events straddle chunks.
bool SendChunked(int fd, const std::string& payload, size_t piece) {
  for (size_t i = 0; i < payload.size(); i += piece) {
    const std::string part = payload.substr(i, piece);
    if (!SendAll(fd, absl::StrFormat("%x\r\n%s\r\n", part.size(), part))) return false;
  }
  return true;
}

std::string Response(int status, const std::string& reason, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, " ", reason,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

// With `with_id`, the chunk carries return_token_ids' `token_ids`: [kFirstTokenId + i].
std::string TokenChunk(int i, bool with_id = false) {
  json choice = {{"index", 0}, {"text", absl::StrCat("t", i)}, {"finish_reason", nullptr}};
  if (with_id) choice["token_ids"] = json::array({FakeOpenAiServer::kFirstTokenId + i});
  return "data: " + json{{"object", "text_completion"}, {"choices", json::array({choice})}}.dump() + "\n\n";
}

}  // namespace

FakeOpenAiServer::FakeOpenAiServer(Tokenize tokenize) : tokenize_(tokenize) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 128) != 0) {
    std::abort();
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  stop_ = true;
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::thread> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (std::thread& t : connections) t.join();
}

std::vector<json> FakeOpenAiServer::completion_bodies() const {
  absl::MutexLock lock(&mu_);
  return bodies_;
}

std::vector<json> FakeOpenAiServer::tokenize_bodies() const {
  absl::MutexLock lock(&mu_);
  return tokenize_bodies_;
}

void FakeOpenAiServer::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    connections_.emplace_back([this, fd] {
      Serve(fd);
      close(fd);
    });
  }
}

void FakeOpenAiServer::Serve(int fd) {
  std::string request;
  char buf[4096];
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  while (header_end == std::string::npos || request.size() < header_end + 4 + content_length) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos && (header_end = request.find("\r\n\r\n")) != std::string::npos) {
      const std::string headers = absl::AsciiStrToLower(request.substr(0, header_end));
      const size_t at = headers.find("content-length:");
      if (at != std::string::npos) {
        const size_t end = headers.find("\r\n", at);
        std::string value(absl::StripAsciiWhitespace(headers.substr(at + 15, end - at - 15)));
        (void)absl::SimpleAtoi(value, &content_length);
      }
    }
  }
  const std::string request_line = request.substr(0, request.find("\r\n"));
  const std::string body_text = request.substr(header_end + 4, content_length);
  const json body = json::parse(body_text, nullptr, false);
  if (request_line.rfind("GET /v1/models ", 0) == 0) {
    SendAll(fd, Response(200, "OK", R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})"));
  } else if (request_line.rfind("POST /tokenize ", 0) == 0) {
    {
      absl::MutexLock lock(&mu_);
      tokenize_bodies_.push_back(body);
    }
    const char* ids = R"({"count":4,"tokens":[5,6,7,5]})";
    const std::string not_found = Response(404, "Not Found", R"({"error":{"message":"no such route"}})");
    switch (tokenize_) {
      case Tokenize::kOrca:
        SendAll(fd, body.is_object() && body.contains("prompt") ? Response(200, "OK", ids) : not_found);
        break;
      case Tokenize::kLlamaCpp:  // as llama-server's handler: no "content", no tokens, still 200
        SendAll(fd, Response(200, "OK", body.is_object() && body.contains("content") ? ids : R"({"tokens":[]})"));
        break;
      case Tokenize::kNone:
        SendAll(fd, not_found);
        break;
    }
  } else if (request_line.rfind("POST /v1/completions ", 0) == 0 && body.is_object()) {
    {
      absl::MutexLock lock(&mu_);
      bodies_.push_back(body);
    }
    StreamCompletion(fd, body);
  } else {
    SendAll(fd, Response(400, "Bad Request", R"({"error":{"message":"bad request"}})"));
  }
}

void FakeOpenAiServer::StreamCompletion(int fd, const json& body) {
  const int max_tokens = body.value("max_tokens", 16);
  if (max_tokens == kHttpError) {
    SendAll(fd,
            Response(500, "Internal Server Error", R"({"error":{"message":"engine exploded","type":"server_error"}})"));
    return;
  }
  if (!SendAll(fd,
               "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
               "Connection: close\r\n\r\n")) {
    return;
  }
  if (max_tokens == kErrorEvent) {
    SendChunked(fd, TokenChunk(0) + "data: {\"error\":{\"message\":\"scheduler gone\"}}\n\ndata: [DONE]\n\n", 5);
    SendAll(fd, "0\r\n\r\n");
    return;
  }
  if (max_tokens == kHang) {
    SendChunked(fd, TokenChunk(0), 1000);
    while (!stop_) {  // until the client gives up and closes
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char probe;
      if (recv(fd, &probe, 1, MSG_DONTWAIT) <= 0) break;
    }
    return;
  }
  std::string stream;
  const bool with_ids = body.value("return_token_ids", false);
  for (int i = 0; i < max_tokens; ++i) stream += TokenChunk(i, with_ids);
  stream += "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
  const auto options = body.find("stream_options");
  if (options != body.end() && options->is_object() && options->value("include_usage", false)) {
    const json usage = {{"prompt_tokens", body.value("prompt", json::array()).size()},
                        {"completion_tokens", max_tokens}};
    stream += "data: " + json{{"choices", json::array()}, {"usage", usage}}.dump() + "\n\n";
  }
  stream += "data: [DONE]\n\n";
  SendChunked(fd, stream, 7);
  SendAll(fd, "0\r\n\r\n");
}

}  // namespace orca::loadgen::testing
