#pragma once
// A minimal OpenAI-compatible HTTP server on 127.0.0.1 for the load driver's tests: one
// thread per connection, chunked SSE streams split at awkward byte boundaries, and
// scripted misbehaviour selected by the request's max_tokens.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen::testing {

class FakeOpenAiServer {
 public:
  /// max_tokens values that script a misbehaving request.
  static constexpr int kHttpError = 999;   ///< HTTP 500 with an OpenAI error body.
  static constexpr int kErrorEvent = 997;  ///< One token, then an error event.
  static constexpr int kHang = 998;        ///< One token, then nothing until the client leaves.
  /// With "return_token_ids": true, token i of a stream carries token_ids [kFirstTokenId + i].
  static constexpr int kFirstTokenId = 700;

  /// How POST /tokenize answers (always with ids [5, 6, 7, 5] when it does).
  enum class Tokenize {
    kOrca,      ///< Orca/vLLM: a body with "prompt"; anything else is 404.
    kLlamaCpp,  ///< llama-server: a body with "content"; any other body gets 200 {"tokens": []}.
    kNone,      ///< 404 whatever the body (servers without the route).
  };

  explicit FakeOpenAiServer(Tokenize tokenize = Tokenize::kOrca);
  ~FakeOpenAiServer();

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Bodies of every POST /v1/completions received.
  std::vector<nlohmann::json> completion_bodies() const;
  /// Bodies of every POST /tokenize received, in order.
  std::vector<nlohmann::json> tokenize_bodies() const;

 private:
  void AcceptLoop();
  void Serve(int fd);
  void StreamCompletion(int fd, const nlohmann::json& body);

  Tokenize tokenize_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> bodies_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> tokenize_bodies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::loadgen::testing
