#pragma once
/// Fluent builder for scheduler test requests:
///   RequestBuilder().Prompt(32).MaxNewTokens(64).Id("a").Build()

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/sched/request_spec.h"

namespace orca::sched::testing {

class RequestBuilder {
 public:
  RequestBuilder() { spec_.prompt_token_ids = {1, 2, 3, 4}; }

  /// A prompt of `num_tokens` tokens (ids 1..num_tokens, never an EOS used by tests).
  RequestBuilder& Prompt(int32_t num_tokens) {
    spec_.prompt_token_ids.clear();
    for (int32_t i = 0; i < num_tokens; ++i) spec_.prompt_token_ids.push_back(100 + i % 900);
    return *this;
  }
  RequestBuilder& PromptIds(std::vector<int32_t> ids) {
    spec_.prompt_token_ids = std::move(ids);
    return *this;
  }
  RequestBuilder& MaxNewTokens(int32_t n) {
    spec_.max_new_tokens = n;
    return *this;
  }
  RequestBuilder& MinNewTokens(int32_t n) {
    spec_.min_new_tokens = n;
    return *this;
  }
  RequestBuilder& Id(std::string caller_id) {
    spec_.caller_id = std::move(caller_id);
    return *this;
  }
  RequestBuilder& StopTokens(std::vector<int32_t> ids) {
    spec_.stop_token_ids = std::move(ids);
    return *this;
  }
  RequestBuilder& Eos(std::vector<int32_t> ids) {
    spec_.eos_token_ids = std::move(ids);
    return *this;
  }
  RequestBuilder& IgnoreEos(bool ignore = true) {
    spec_.ignore_eos = ignore;
    return *this;
  }
  RequestBuilder& Deadline(absl::Time deadline) {
    spec_.deadline = deadline;
    return *this;
  }
  RequestBuilder& Temperature(float temperature) {
    spec_.sampling.temperature = temperature;
    return *this;
  }
  RequestSpec Build() const { return spec_; }

 private:
  RequestSpec spec_;
};

}  // namespace orca::sched::testing
