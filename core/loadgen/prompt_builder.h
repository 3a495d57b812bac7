#pragma once
/// Token-id prompts of an exact length. The completions API accepts a prompt as a list of
/// token ids, so a trace's prompt length is what the server sees, whatever its tokenizer.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/loadgen/poisson_trace.h"

namespace orca::loadgen {

class PromptBuilder {
 public:
  /// Draws every prompt token uniformly from `candidate_ids` (non-empty, each >= 0).
  /// `description` says where the ids came from (printed with the results).
  static absl::StatusOr<PromptBuilder> FromCandidates(std::vector<int32_t> candidate_ids, std::string description,
                                                      uint64_t seed);

  /// The prompt of trace request `index`: `length` ids, the same for the same seed, index and
  /// length (so a rate sweep replays identical prompts), and different across requests (no
  /// shared prefixes for a prefix cache to exploit).
  std::vector<int32_t> Build(int64_t index, int32_t length) const;
  /// A prompt made of segments: each segment's ids depend on its key only (and the seed), so
  /// requests sharing a key share those tokens exactly (a system prompt, earlier turns).
  std::vector<int32_t> Build(const std::vector<PromptSegment>& segments) const;

  const std::string& description() const { return description_; }
  size_t num_candidates() const { return candidate_ids_.size(); }

 private:
  PromptBuilder(std::vector<int32_t> ids, std::string description, uint64_t seed)
      : candidate_ids_(std::move(ids)), description_(std::move(description)), seed_(seed) {}

  std::vector<int32_t> candidate_ids_;
  std::string description_;
  uint64_t seed_ = 0;
};

struct PromptSourceOptions {
  std::string base_url;
  std::string model;
  std::string api_key;
  /// "auto": tokenize a built-in English text on the server (POST /tokenize, the Orca/vLLM
  /// body first, then llama.cpp's `{"content"}` when the first is refused or answered with no
  /// tokens, as llama-server does) and draw from its distinct ids; if that gives no ids,
  /// random ids in [token_id_min, token_id_max] — but only when `token_id_range_given`: the
  /// default range is BOS/EOS/byte tokens in Llama vocabularies, so without a chosen range
  /// auto fails (FAILED_PRECONDITION, saying what the server answered). "tokenize": the
  /// server's ids or an error. "random": the range, whatever it is.
  std::string mode = "auto";
  int32_t token_id_min = 1;
  int32_t token_id_max = 255;
  /// The user chose [token_id_min, token_id_max] (a fallback auto may use).
  bool token_id_range_given = false;
  uint64_t seed = 1;
  absl::Duration timeout = absl::Seconds(10);
};

absl::StatusOr<PromptBuilder> ResolvePromptBuilder(const PromptSourceOptions& options);

/// The ids of a POST /tokenize response body ({"tokens": [...]}, Orca, vLLM and llama.cpp;
/// llama.cpp may give [id, piece] pairs). INVALID_ARGUMENT when there are none.
absl::StatusOr<std::vector<int32_t>> ParseTokenizeResponse(const std::string& body);

}  // namespace orca::loadgen
