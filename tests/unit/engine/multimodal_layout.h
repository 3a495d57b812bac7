#pragma once
// Multimodal checkpoints (Gemma 3's, Mistral 3's) hold a text model's config under text_config and its
// tensors under language_model.model. (transformers before 4.52) or model.language_model. (later). These
// helpers rewrite a synthetic text checkpoint into such a layout, so that a test can check that the same
// weights give the same logits either way.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine::testing {

/// The logits of one step computing `prompt` on the checkpoint at `dir` (empty, with a test failure, when it
/// does not load).
inline std::vector<float> FirstStepLogits(const std::string& dir, const std::vector<int32_t>& prompt) {
  Engine::Options eo;
  eo.model_path = dir;
  eo.n_slots = 256;
  eo.keep_logits = true;
  auto engine = Engine::Create(eo);
  EXPECT_TRUE(engine.ok()) << dir << ": " << engine.status();
  if (!engine.ok()) return {};
  StepInput input;
  input.seqs = {NewSeq(1, prompt, 64)};
  StepOutput out;
  EXPECT_TRUE((*engine)->Step(input, nullptr, &out).ok());
  return out.logits;
}

/// Where a multimodal checkpoint keeps its language model and how it is named.
struct MultimodalLayout {
  std::string prefix;         ///< "language_model.model." or "model.language_model."
  std::string head_name;      ///< the untied head's tensor name ("lm_head.weight" unless the layout renames it)
  std::string model_type;     ///< config.json's model_type
  std::string architecture;   ///< config.json's architectures[0]
  std::string vision_type;    ///< vision_config.model_type
};

/// Writes the text checkpoint `text_dir` (config.json + one model.safetensors) into `dir` in `layout`: the
/// same tensor bytes, their names under the layout's prefix, its config as text_config.
inline void WriteMultimodalCheckpoint(const std::string& text_dir, const std::string& dir,
                                      const MultimodalLayout& layout) {
  std::ifstream st(text_dir + "/model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, header_len));
  nlohmann::ordered_json renamed;
  for (const auto& [name, entry] : header.items()) {
    const std::string moved = name == "lm_head.weight"          ? layout.head_name
                              : name.rfind("model.", 0) == 0 ? layout.prefix + name.substr(6)
                                                              : name;
    renamed[moved] = entry;
  }
  std::string h = renamed.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data stays 8-byte aligned
  const uint64_t len = h.size();
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << bytes.substr(8 + header_len);
  out.close();
  std::ifstream cf(text_dir + "/config.json");
  nlohmann::json config = {{"model_type", layout.model_type},
                           {"architectures", {layout.architecture}},
                           {"text_config", nlohmann::json::parse(cf)},
                           {"vision_config", {{"model_type", layout.vision_type}}}};
  config["text_config"].erase("architectures");
  std::ofstream(dir + "/config.json") << config.dump(2);
}

}  // namespace orca::engine::testing
