#pragma once
/// A stand-in for orca-scheduler, for testing and benchmarking the gateway
/// without an engine: a real gRPC server implementing orca.v1.Scheduler that
/// "generates" deterministic tokens, one per running request per iteration,
/// and records what it saw (requests, cancellations, outstanding calls, KV
/// slots held).
///
/// Tokens depend only on the prompt, the position and (when sampling with a
/// seed) the seed, so greedy requests are reproducible, seeded ones differ by
/// seed, and the gateway's detokenization / stop strings see realistic input.
/// With sampling.prompt_logprobs, the first message carries made-up prompt
/// logprobs (position p scores -p / 2) for the gateway's rendering.
/// A cancelled call (client disconnect, stop string) releases its KV slots at
/// the next iteration, as the real scheduler does.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orca/v1/scheduler.grpc.pb.h"

namespace orca::gateway::testing {

class FakeScheduler {
 public:
  struct Options {
    std::string listen = "127.0.0.1:0";
    std::string model_name = "fake-model";
    int32_t max_context = 1024;
    int32_t vocab_size = 256;
    /// Generated tokens come from [token_min, token_max).
    int32_t token_min = 32;
    int32_t token_max = 127;
    /// When non-empty, token i of every request is script[i % size] instead
    /// (exact byte streams with the byte-level test tokenizer).
    std::vector<int32_t> script;
    /// One iteration emits one token for every running request.
    absl::Duration iteration_interval = absl::Milliseconds(2);
    /// When >= 0: generated as the `eos_after`-th token (1-based) unless the
    /// request sets ignore_eos.
    int32_t eos_id = -1;
    int32_t eos_after = 0;
    /// KV budget (tokens); a request holds prompt + max_new_tokens slots.
    /// Over budget, or over max_running requests: RESOURCE_EXHAUSTED.
    int64_t n_slots = int64_t{1} << 30;
    int32_t max_running = 0;  // 0: unlimited
    /// Reported by GetStats as the real scheduler's KV limits (0: not reported).
    int64_t max_request_kv_slots = 0;
    int32_t kv_block_size = 0;
    bool shares_group_prompts = false;
    bool ready = true;
  };

  static absl::StatusOr<std::unique_ptr<FakeScheduler>> Start(Options options);
  ~FakeScheduler();
  FakeScheduler(const FakeScheduler&) = delete;
  FakeScheduler& operator=(const FakeScheduler&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  /// Readiness reported by GetStats; not ready also fails Generate (UNAVAILABLE).
  void SetReady(bool ready);
  /// GetStats answers only after `delay` (a stalled scheduler: GC pause, SIGSTOP); zero = at once.
  void StallStats(absl::Duration delay);
  /// The next Generate call fails with `code` after streaming `after_tokens`
  /// tokens (0: at once, as an RPC error); with after_tokens > 0 the failure
  /// is a FINISH_REASON_ERROR message carrying `message`.
  void FailNextGenerate(grpc::StatusCode code, std::string message, int after_tokens = 0);

  // Observations.
  int num_running() const;
  int64_t kv_slots_used() const;
  int64_t num_cancelled() const;
  int64_t num_generate_calls() const;
  /// The "authorization" metadata of the last Generate call ("" without one).
  std::string last_authorization() const;
  uint64_t iterations() const;
  std::vector<orca::v1::GenerateRequest> requests() const;
  /// Waits until `condition` holds (checked at every iteration); false on timeout.
  bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) const;

  /// The token generated at `position` (0-based) for `request`.
  int32_t TokenAt(const orca::v1::GenerateRequest& request, int position) const;

  void Shutdown();

 private:
  class Service;
  class Stream;
  explicit FakeScheduler(Options options);
  void IterationLoop();
  /// Prepares a stream's next message (one token, or the failure it was told
  /// to report) and marks it as being written.
  void Step(Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t TokenFor(uint64_t salt, const orca::v1::GenerateRequest& request, int position) const;

  const Options options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread loop_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = true;
  absl::Duration stats_delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::vector<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  int64_t kv_slots_used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_generate_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_authorization_ ABSL_GUARDED_BY(mu_);
  uint64_t iterations_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unseeded_counter_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<orca::v1::GenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  struct Failure {
    grpc::StatusCode code;
    std::string message;
    int after_tokens;
  };
  std::vector<Failure> failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::gateway::testing
