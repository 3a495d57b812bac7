#include "core/loadgen/prompt_builder.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/split_mix64.h"
#include "core/common/status_macros.h"
#include "core/loadgen/http_client.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen {
namespace {

using json = nlohmann::json;

constexpr int32_t kMaxRandomIds = 1 << 22;

/// Ordinary English prose, tokenized on the server so that prompts are made of tokens its
/// tokenizer really produces (no special or unused ids).
constexpr const char* kCalibrationText =
    "The harbor town woke slowly that morning. Fishermen checked their nets while the baker "
    "pulled the first loaves from a stone oven, and children ran along the seawall counting "
    "gulls. A ferry horn sounded twice across the water. In the library on the hill, an old "
    "clerk opened the shutters, wound the tall clock, and began sorting letters that had "
    "arrived overnight: invoices from the mill, a postcard from a traveling cousin, three "
    "requests for maps of the northern coast. By noon the market square was crowded with "
    "carts of apples, cheese, copper pots and wool blankets. Merchants argued about prices, "
    "musicians tuned their violins near the fountain, and a teacher led a line of students "
    "toward the lighthouse to measure the height of the tide. Weather reports promised rain "
    "for the evening, so sailors tied down their boats, painters covered their easels, and "
    "everyone agreed that the autumn festival would begin one day later than planned.";

/// The ids the server's POST /tokenize gives for kCalibrationText. Each request body dialect in
/// turn: a refusal (non-200) or an answer without tokens (llama-server answers a body without
/// "content" with an empty list) moves on to the next. UNAVAILABLE when the server is down,
/// NOT_FOUND when every body was refused, INVALID_ARGUMENT when one was accepted but no body
/// gave ids; the message says what each body got.
absl::StatusOr<std::vector<int32_t>> Tokenize(const PromptSourceOptions& options) {
  const std::string url = JoinUrl(options.base_url, "/tokenize");
  struct Dialect {
    const char* name;
    std::string body;
  };
  const Dialect dialects[] = {
      {"Orca/vLLM body {\"prompt\"}",
       json{{"model", options.model}, {"prompt", kCalibrationText}, {"add_special_tokens", false}}.dump()},
      {"llama.cpp body {\"content\"}", json{{"content", kCalibrationText}, {"add_special", false}}.dump()},
  };
  std::vector<std::string> outcomes;
  bool accepted = false;
  for (const Dialect& dialect : dialects) {
    absl::StatusOr<HttpResponse> response = HttpPostJson(url, dialect.body, options.timeout, options.api_key);
    if (!response.ok()) return response.status();  // the server is down: no point retrying
    if (response->status != 200) {
      outcomes.push_back(absl::StrCat(dialect.name, ": HTTP ", response->status));
      continue;
    }
    accepted = true;
    absl::StatusOr<std::vector<int32_t>> ids = ParseTokenizeResponse(response->body);
    if (ids.ok()) return ids;
    outcomes.push_back(absl::StrCat(dialect.name, ": ", ids.status().message()));
  }
  const std::string message = absl::StrCat("POST ", url, " gave no token ids (", absl::StrJoin(outcomes, "; "), ")");
  return accepted ? absl::InvalidArgumentError(message) : absl::NotFoundError(message);
}

}  // namespace

absl::StatusOr<PromptBuilder> PromptBuilder::FromCandidates(std::vector<int32_t> candidate_ids, std::string description,
                                                            uint64_t seed) {
  if (candidate_ids.empty()) return absl::InvalidArgumentError("no candidate prompt token ids");
  for (int32_t id : candidate_ids) {
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " is negative"));
    }
  }
  return PromptBuilder(std::move(candidate_ids), std::move(description), seed);
}

std::vector<int32_t> PromptBuilder::Build(int64_t index, int32_t length) const {
  // One stream per request, independent of the order the requests are built in.
  SplitMix64 rng(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(index) + 1);
  std::vector<int32_t> ids(static_cast<size_t>(std::max(length, 0)));
  const int64_t last = static_cast<int64_t>(candidate_ids_.size()) - 1;
  for (int32_t& id : ids) id = candidate_ids_[static_cast<size_t>(rng.NextInt(0, last))];
  return ids;
}

std::vector<int32_t> PromptBuilder::Build(const std::vector<PromptSegment>& segments) const {
  std::vector<int32_t> ids;
  const int64_t last = static_cast<int64_t>(candidate_ids_.size()) - 1;
  for (const PromptSegment& segment : segments) {
    SplitMix64 rng((seed_ ^ 0x5e97e47ULL) * 0xbf58476d1ce4e5b9ULL + segment.key);
    for (int32_t i = 0; i < segment.num_tokens; ++i) {
      ids.push_back(candidate_ids_[static_cast<size_t>(rng.NextInt(0, last))]);
    }
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ParseTokenizeResponse(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError("/tokenize response is not a JSON object");
  }
  auto tokens = parsed.find("tokens");
  if (tokens == parsed.end() || !tokens->is_array()) {
    return absl::InvalidArgumentError("/tokenize response has no 'tokens' array");
  }
  std::vector<int32_t> ids;
  for (const json& token : *tokens) {
    // A bare id; llama.cpp with_pieces: [id, piece] or {"id": id, "piece": ...}.
    const json* id = &token;
    if (token.is_array() && !token.empty()) id = &token.front();
    if (token.is_object() && token.contains("id")) id = &*token.find("id");
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("/tokenize returned a token that is not an id: ", token.dump()));
    }
    ids.push_back(id->get<int32_t>());
  }
  if (ids.empty()) return absl::InvalidArgumentError("/tokenize returned no tokens");
  return ids;
}

absl::StatusOr<PromptBuilder> ResolvePromptBuilder(const PromptSourceOptions& options) {
  if (options.mode != "auto" && options.mode != "tokenize" && options.mode != "random") {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt token source must be auto, tokenize or random (got '", options.mode, "')"));
  }
  if (options.mode != "random") {
    absl::StatusOr<std::vector<int32_t>> ids = Tokenize(options);
    if (ids.ok()) {
      std::sort(ids->begin(), ids->end());
      ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
      const std::string description =
          absl::StrCat("token-id prompts drawn from the ", ids->size(),
                       " distinct ids of a built-in English text tokenized by the server (POST /tokenize)");
      return PromptBuilder::FromCandidates(*std::move(ids), description, options.seed);
    }
    if (options.mode == "tokenize") return Annotate(ids.status(), "prompt token source");
    if (absl::IsUnavailable(ids.status())) return ids.status();  // server unreachable
    if (!options.token_id_range_given) {
      return absl::FailedPreconditionError(absl::StrCat(
          "prompt token source: ", ids.status().message(),
          "; random ids need a range of ordinary tokens of the server's vocabulary (--token-id-min/--token-id-max; "
          "the default [",
          options.token_id_min, ", ", options.token_id_max, "] holds BOS/EOS/byte tokens in Llama vocabularies)"));
    }
  }
  if (options.token_id_min < 0 || options.token_id_max < options.token_id_min ||
      options.token_id_max - options.token_id_min >= kMaxRandomIds) {
    return absl::InvalidArgumentError(absl::StrCat("token id range needs 0 <= min <= max < min + ", kMaxRandomIds,
                                                   " (got ", options.token_id_min, ", ", options.token_id_max, ")"));
  }
  std::vector<int32_t> ids;
  for (int32_t id = options.token_id_min; id <= options.token_id_max; ++id) ids.push_back(id);
  return PromptBuilder::FromCandidates(
      std::move(ids),
      absl::StrCat("token-id prompts of random ids in [", options.token_id_min, ", ", options.token_id_max, "]"),
      options.seed);
}

}  // namespace orca::loadgen
