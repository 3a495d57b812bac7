#pragma once
/// A tiny byte-level "model" for tests and benchmarks that need a real
/// tokenizer but no checkpoint: GPT-2-style byte-level BPE with one token per
/// byte (ids 0..255, no merges) plus <|endoftext|> (id 256) as BOS/EOS.
/// Token id == byte value, so tests can script exact byte streams (partial
/// UTF-8 sequences, stop strings across tokens).

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace orca::gateway::testing {

inline constexpr int32_t kByteLevelEosId = 256;
inline constexpr int32_t kByteLevelVocabSize = 257;

/// tokenizer.json text.
std::string ByteLevelTokenizerJson();
/// tokenizer_config.json text (eos/bos "<|endoftext|>", no BOS added).
std::string ByteLevelTokenizerConfigJson();
/// Writes tokenizer.json, tokenizer_config.json and config.json (with
/// `max_context` as max_position_embeddings) into `dir` (created if needed).
absl::Status WriteByteLevelModel(const std::string& dir, int32_t max_context);

}  // namespace orca::gateway::testing
