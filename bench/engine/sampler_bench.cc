// Sampler microbenchmark: one sampled token (Sampler::Sample) from a row of logits, per
// vocabulary size and sampling mix, on one thread. The logits are the same random row every
// time (normal, standard deviation --spread), copied in before each draw (the copy is timed
// separately and subtracted). The flatter the row (smaller --spread; random weights give flat
// rows), the more tokens a top-p cut keeps and the longer it takes.
//
//   sampler_bench [--vocab 32000,49152,128256] [--spread 3] [--draws 200]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/common/flags.h"
#include "core/engine/sampler.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Mix {
  const char* name;
  float temperature, top_p;
  int32_t top_k;
  float min_p;
  bool logprobs;
  int32_t top_logprobs;
};

constexpr Mix kMixes[] = {
    {"greedy", 0, 1, 0, 0, false, 0},
    {"greedy, logprobs", 0, 1, 0, 0, true, 0},
    {"greedy, 5 top logprobs", 0, 1, 0, 0, true, 5},
    {"T 0.8", 0.8f, 1, 0, 0, false, 0},
    {"T 0.8, top_p 0.95", 0.8f, 0.95f, 0, 0, false, 0},
    {"T 1, top_p 0.9", 1, 0.9f, 0, 0, false, 0},
    {"T 0.8, top_k 40, top_p 0.95, min_p 0.05", 0.8f, 0.95f, 40, 0.05f, false, 0},
};

double MicrosPer(int draws, Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / draws;
}

int Run(const std::vector<int32_t>& vocabs, double spread, int draws) {
  std::printf("%-42s %8s %12s\n", "mix", "vocab", "us/token");
  for (int32_t vocab : vocabs) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, static_cast<float>(spread));
    std::vector<float> base(vocab), row;
    for (float& v : base) v = normal(rng);
    auto c0 = Clock::now();
    for (int i = 0; i < draws; ++i) row = base;
    const double copy_us = MicrosPer(draws, c0, Clock::now());
    for (const Mix& m : kMixes) {
      SamplingParams p;
      p.temperature = m.temperature, p.top_p = m.top_p, p.top_k = m.top_k, p.min_p = m.min_p;
      p.logprobs = m.logprobs, p.top_logprobs = m.top_logprobs;
      engine::Sampler s(p, 7, {});
      int64_t checksum = 0;
      const auto t0 = Clock::now();
      for (int i = 0; i < draws; ++i) {
        row = base;
        checksum += s.Sample(row.data(), vocab).token_id;
      }
      const double us = MicrosPer(draws, t0, Clock::now()) - copy_us;
      std::printf("%-42s %8d %12.1f\n", m.name, vocab, us);
      if (checksum < 0) return 1;  // keeps the draws
    }
  }
  return 0;
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  std::vector<std::string> vocab_list{"32000", "49152", "128256"};
  double spread = 3;
  int64_t draws = 200;
  orca::FlagSet flags("sampler_bench",
                      "Sampler microbenchmark: microseconds per sampled token, per vocabulary and mix.");
  flags.AddStringList("vocab", &vocab_list, "Vocabulary sizes");
  flags.AddDouble("spread", &spread, "Standard deviation of the random logits (larger: a more peaked row)");
  flags.AddInt("draws", &draws, "Tokens sampled per vocabulary and mix");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  std::vector<int32_t> vocabs;
  for (const std::string& v : vocab_list) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 1 || n > (1 << 22)) {
      std::fprintf(stderr, "sampler_bench: --vocab takes integers in [1, %d], got '%s'\n", 1 << 22, v.c_str());
      return 2;
    }
    vocabs.push_back(n);
  }
  if (!(spread > 0) || draws < 1) {
    std::fprintf(stderr, "sampler_bench: --spread must be > 0 and --draws >= 1\n");
    return 2;
  }
  return orca::bench::Run(vocabs, spread, static_cast<int>(draws));
}
