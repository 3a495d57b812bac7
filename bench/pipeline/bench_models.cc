#include "bench/pipeline/bench_models.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/status_macros.h"
#include "core/common/subprocess.h"

extern char** environ;

namespace orca::bench {

absl::StatusOr<std::vector<std::string>> SynthFlags(const std::string& preset) {
  if (preset == "tiny" || preset == "25m") return std::vector<std::string>{"--preset=" + preset};
  if (preset == "4m") {
    return std::vector<std::string>{"--preset=tiny",    "--hidden-size=256",       "--num-layers=4",   "--num-heads=4",
                                    "--num-kv-heads=2", "--intermediate-size=704", "--vocab-size=2048"};
  }
  return absl::InvalidArgumentError(absl::StrCat("preset must be tiny, 4m or 25m (got '", preset, "')"));
}

absl::StatusOr<std::string> EnsureSyntheticModel(const std::string& bin_dir, const std::string& preset,
                                                 const std::string& model_dir) {
  ORCA_ASSIGN_OR_RETURN(std::vector<std::string> flags, SynthFlags(preset));
  const std::string dir = std::filesystem::absolute(model_dir + "/llama-" + preset).string();
  if (std::filesystem::exists(dir + "/model.safetensors") && std::filesystem::exists(dir + "/tokenizer.json")) {
    return dir;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(dir, ": ", ec.message()));
  std::vector<std::string> argv = {bin_dir + "/orca", "model", "synth", "--out=" + dir};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ORCA_RETURN_IF_ERROR(RunToCompletion(argv));
  return dir;
}

}  // namespace orca::bench
