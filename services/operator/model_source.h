#pragma once
/// Where an OrcaDeployment's checkpoint comes from (spec.model.uri).
///
///   pvc://CLAIM/PATH            a PersistentVolumeClaim mounted read-only at /models
///   /abs/path, file:///abs/path a path already present in the container
///   synthetic://ARCH?k=v&...    a random checkpoint every pod synthesizes with
///                               `orca model synth` (ARCH = llama | gpt2)

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::k8s {

/// Architecture and sizes of a synthetic checkpoint (flags of `orca model synth`).
struct SyntheticModel {
  std::string arch = "llama";
  int64_t num_layers = 2;
  int64_t hidden_size = 64;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 0;       // 0 = num_heads
  int64_t intermediate_size = 0;  // 0 = 4 * hidden_size (gpt2) or the synth default
  int64_t vocab_size = 512;       // >= 260: the synthetic tokenizer is byte-level
  int64_t max_position = 2048;
  int64_t seed = 0;
  std::string dtype = "f32";

  /// KV bytes of one token over all layers: 2 (K and V) x layers x kv_heads x head_dim x dtype size.
  int64_t KvBytesPerToken() const;
  /// Arguments after `orca model synth`, writing into `out_dir`.
  std::vector<std::string> SynthArgs(const std::string& out_dir) const;
};

struct ModelSource {
  enum class Kind { kPvc, kPath, kSynthetic };
  Kind kind = Kind::kPath;
  /// kPvc: the claim and the path inside it ("" = the volume root).
  std::string claim;
  std::string sub_path;
  /// kPath: the absolute path in the container.
  std::string local_path;
  /// kSynthetic: what to synthesize.
  SyntheticModel synthetic;

  /// The path the processes pass to --model.
  std::string ContainerModelPath() const;
};

/// Mount point of the model volume (PVC or synthetic emptyDir).
inline constexpr char kModelMountPath[] = "/models";

/// Parses spec.model.uri. Errors name the field and the accepted forms.
absl::StatusOr<ModelSource> ParseModelUri(const std::string& uri);

}  // namespace orca::k8s
