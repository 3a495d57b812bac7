#pragma once
/// Synthetic checkpoints shared by the real-engine benchmarks, written by `orca model synth`
/// (weights, config and a byte-level tokenizer, so the gateway can serve them too).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace orca::bench {

/// The `orca model synth` flags of a preset: "tiny" (0.13M params, hidden 64, 2 layers),
/// "4m" (3.7M: hidden 256, 4 layers, vocab 2048) or "25m" (orca serve's default model).
absl::StatusOr<std::vector<std::string>> SynthFlags(const std::string& preset);

/// <model_dir>/llama-<preset>, written with <bin_dir>/orca the first time.
absl::StatusOr<std::string> EnsureSyntheticModel(const std::string& bin_dir, const std::string& preset,
                                                 const std::string& model_dir);

}  // namespace orca::bench
