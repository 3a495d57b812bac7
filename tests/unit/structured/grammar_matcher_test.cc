// Token masks: exactly the tokens whose bytes the grammar can take next
// (checked against a brute force over the vocabulary), EOS only where the
// grammar may end, the cache reused across requests, and ApplyToLogits.

#include "core/structured/grammar_matcher.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/structured/compile.h"
#include "gtest/gtest.h"
#include "tests/unit/structured/test_util.h"

namespace orca::structured {
namespace {

std::shared_ptr<const TokenVocabulary> SmallVocab() {
  // Multi-byte tokens crossing JSON token boundaries, as BPE vocabularies have.
  std::vector<std::string> t = {"{",    "}",    "\"",       ":",      ",",     " ",  "\n",  "a",    "b",
                                "ab",   "\"a",  "\":",      "\": \"", "1",     "12", "-",   "true", "tr",
                                "ue",   "null", "{\"",      "\"}",    "[",     "]",  "x\"", "\\",   "\\n",
                                "\xC3", "\xA9", "\xC3\xA9", "",       "\"b\"", "  ", "},",  "e"};
  t.push_back("");  // id 35: EOS
  return TokenVocabulary::FromBytes(t, {35});
}

// Allowed set by brute force: every token whose bytes the grammar accepts from `states`.
std::vector<bool> BruteForce(GrammarRuntime& rt, const GrammarRuntime::StateSet& states) {
  std::vector<bool> out(rt.vocab().vocab_size());
  for (int32_t id = 0; id < rt.vocab().vocab_size(); ++id)
    out[id] = rt.vocab().in_trie(id) && !rt.AdvanceBytes(states, rt.vocab().bytes(id)).empty();
  return out;
}

TEST(GrammarMatcherTest, MaskEqualsBruteForceAlongRandomWalks) {
  auto vocab = SmallVocab();
  auto g = CompileSpec(testing::SchemaSpec(
      R"({"type":"object","properties":{"a":{"type":"string"},"ab":{"type":["integer","boolean","null"]}},
          "required":["a"]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  auto rt = std::make_shared<GrammarRuntime>(*g, vocab);
  std::mt19937 rng(7);
  int completed = 0;
  for (int walk = 0; walk < 200; ++walk) {
    GrammarMatcher m(rt, {});
    GrammarRuntime::StateSet states = rt->Initial();
    std::string text;
    for (int step = 0; step < 40; ++step) {
      std::shared_ptr<const TokenMask> mask = rt->Mask(states);
      const std::vector<bool> want = BruteForce(*rt, states);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
        ASSERT_EQ(mask->Test(id), want[id]) << "token " << id << " after \"" << text << "\"";
        if (m.IsAllowed(id)) allowed.push_back(id);
      }
      EXPECT_EQ(m.IsAllowed(35), GrammarRuntime::CanEnd(states)) << text;
      ASSERT_FALSE(allowed.empty()) << text;
      const int32_t tok = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.Accept(tok).ok());
      if (tok == 35) {
        ++completed;
        EXPECT_TRUE(m.terminated());
        EXPECT_TRUE(testing::FullMatch(*g, text)) << text;
        break;
      }
      text += vocab->bytes(tok);
      states = rt->AdvanceBytes(states, vocab->bytes(tok));
    }
  }
  EXPECT_GT(completed, 20);
  EXPECT_GT(rt->stats().mask_hits, 0);
}

TEST(GrammarMatcherTest, AfterTheEndOnlyEndTokensAndRejectsEarlyEnd) {
  auto vocab = SmallVocab();
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::kChoice;
  spec.choices = {"ab", "abab"};
  auto g = CompileSpec(spec);
  ASSERT_TRUE(g.ok());
  auto rt = std::make_shared<GrammarRuntime>(*g, vocab);
  GrammarMatcher m(rt, /*end_token_ids=*/{4});  // "," doubles as a stop token
  EXPECT_FALSE(m.IsAllowed(35));
  EXPECT_FALSE(m.Accept(35).ok());  // EOS before the grammar is complete
  EXPECT_FALSE(m.Accept(1).ok());   // "}"
  ASSERT_TRUE(m.Accept(9).ok());    // "ab": complete, may go on
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.IsAllowed(35));
  EXPECT_TRUE(m.IsAllowed(4));
  EXPECT_TRUE(m.IsAllowed(7));  // "a" of "abab"
  std::vector<float> logits(vocab->vocab_size(), 1.0f);
  m.ApplyToLogits(logits.data(), static_cast<int32_t>(logits.size()));
  for (int32_t id = 0; id < vocab->vocab_size(); ++id)
    EXPECT_EQ(std::isfinite(logits[id]), id == 35 || id == 4 || id == 7 || id == 9) << id;
  ASSERT_TRUE(m.Accept(9).ok());  // "abab": complete, nothing more
  std::fill(logits.begin(), logits.end(), 1.0f);
  m.ApplyToLogits(logits.data(), static_cast<int32_t>(logits.size()));
  for (int32_t id = 0; id < vocab->vocab_size(); ++id) EXPECT_EQ(std::isfinite(logits[id]), id == 35 || id == 4) << id;
  ASSERT_TRUE(m.Accept(35).ok());
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.Accept(7).ok());
  EXPECT_TRUE(m.Accept(35).ok());  // EOS again (the scheduler may ignore it before min_tokens)
}

TEST(GrammarMatcherTest, ExtraLogitsPastTheVocabularyAreMasked) {
  auto vocab = SmallVocab();
  auto g = CompileSpec(testing::RegexSpec("a+"));
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(std::make_shared<GrammarRuntime>(*g, vocab), {});
  std::vector<float> logits(vocab->vocab_size() + 10, 0.5f);
  m.ApplyToLogits(logits.data(), static_cast<int32_t>(logits.size()));
  EXPECT_TRUE(std::isfinite(logits[7]));  // "a"
  for (size_t i = vocab->vocab_size(); i < logits.size(); ++i) EXPECT_FALSE(std::isfinite(logits[i]));
}

TEST(GrammarMatcherTest, FactorySharesTheMaskCacheBetweenRequests) {
  MatcherFactory factory(SmallVocab());
  auto spec = testing::SchemaSpec(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})");
  GrammarRuntime::Stats after_first;
  for (int r = 0; r < 3; ++r) {
    auto m = factory.NewMatcher(spec);
    ASSERT_TRUE(m.ok()) << m.status();
    for (int32_t tok : {20, 7, 11, 2, 7, 21}) {  // {"a":"a"}
      std::vector<float> logits(36, 0.0f);
      (*m)->ApplyToLogits(logits.data(), 36);
      ASSERT_TRUE(std::isfinite(logits[tok])) << tok;
      ASSERT_TRUE((*m)->Accept(tok).ok()) << tok;
    }
    EXPECT_TRUE((*m)->CanEnd());
    if (r == 0) after_first = factory.stats();
  }
  // Inside the value string, after '"' and after '"a' the parser is in the same state: 5 distinct masks.
  EXPECT_EQ(after_first.mask_misses, 5);
  const GrammarRuntime::Stats s = factory.stats();
  EXPECT_EQ(s.mask_misses, 5);  // the later requests only hit
  EXPECT_EQ(s.mask_hits, after_first.mask_hits + 12);
  EXPECT_FALSE(factory.NewMatcher(testing::SchemaSpec(R"({"type":"integer","multipleOf":3})")).ok());
}

}  // namespace
}  // namespace orca::structured
