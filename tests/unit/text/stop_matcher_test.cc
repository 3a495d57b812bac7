#include "core/text/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace orca::text {
namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  std::string matched;
};

// Feeds `text` in the given chunks, then flushes when no stop was hit.
Outcome Feed(const std::vector<std::string>& stops, const std::vector<std::string>& chunks) {
  StopMatcher m(stops);
  Outcome out;
  for (const std::string& c : chunks) {
    StopMatcher::Result r = m.Push(c);
    out.text += r.emit;
    if (r.stopped) {
      out.stopped = true;
      out.matched = r.matched;
      EXPECT_TRUE(m.Push("more").emit.empty()) << "nothing is emitted after a stop";
      EXPECT_TRUE(m.Flush().empty());
      return out;
    }
  }
  out.text += m.Flush();
  return out;
}

// The reference: cut the whole text before the earliest stop string.
Outcome Reference(const std::vector<std::string>& stops, const std::string& text) {
  Outcome out{text, false, ""};
  size_t best = std::string::npos;
  for (const std::string& s : stops) {
    size_t p = s.empty() ? std::string::npos : text.find(s);
    if (p != std::string::npos && (p < best || (p == best && s.size() > out.matched.size()))) {
      best = p;
      out.matched = s;
    }
  }
  if (best != std::string::npos) {
    out.text = text.substr(0, best);
    out.stopped = true;
  } else {
    out.matched.clear();
  }
  return out;
}

TEST(StopMatcherTest, HoldsBackPossibleStopPrefix) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.Push("Hello </").emit, "Hello ");
  EXPECT_EQ(m.Push("e").emit, "");
  StopMatcher::Result r = m.Push("nd> tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(r.matched, "</end>");
}

TEST(StopMatcherTest, ReleasesTailThatStopsBeingAPrefix) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("ST").emit, "");
  EXPECT_EQ(m.Push("AR").emit, "STAR");
  EXPECT_EQ(m.Push("S").emit, "");
  EXPECT_EQ(m.Flush(), "S");
}

TEST(StopMatcherTest, EarliestStopWins) {
  Outcome o = Feed({"world", "lo w"}, {"hello world"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "hel");
  EXPECT_EQ(o.matched, "lo w");
}

TEST(StopMatcherTest, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Push("abc").emit, "abc");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, RandomSplitsAgreeWithWholeTextReference) {
  std::mt19937 rng(42);
  const std::string alphabet = "ab\n<>é";
  const std::vector<std::vector<std::string>> stop_sets = {{"ab"},  {"aab", "b<"},   {"\n\n"}, {"<>", "a"},
                                                           {"ééa"}, {"abab", "bab"}, {"zzz"}};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) {
      size_t k = rng() % 6;
      text += k == 5 ? std::string("é") : std::string(1, alphabet[k]);
    }
    const auto& stops = stop_sets[trial % stop_sets.size()];
    // Split at random character boundaries (never inside "é").
    std::vector<std::string> chunks;
    std::string cur;
    for (size_t i = 0; i < text.size(); ++i) {
      cur += text[i];
      bool boundary = i + 1 == text.size() || (static_cast<unsigned char>(text[i + 1]) & 0xC0) != 0x80;
      if (boundary && rng() % 3 == 0) {
        chunks.push_back(cur);
        cur.clear();
      }
    }
    if (!cur.empty()) chunks.push_back(cur);
    Outcome got = Feed(stops, chunks);
    Outcome want = Reference(stops, text);
    ASSERT_EQ(got.stopped, want.stopped) << text;
    ASSERT_EQ(got.text, want.text) << text;
    ASSERT_EQ(got.matched, want.matched) << text;
  }
}

}  // namespace
}  // namespace orca::text
