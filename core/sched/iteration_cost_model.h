#pragma once
/// What an iteration costs as a function of its tokens, learned from the iterations the
/// scheduler has seen return: duration ≈ fixed + per_token × tokens, fitted by exponentially
/// weighted least squares (recent iterations count most, so the fit follows a machine
/// whose load changes). Chunked prefill sizes its prompt chunks with it (Sarathi-Serve
/// picks its token budget from the time a decode iteration may take; this learns that
/// relation online instead of profiling it once).

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace orca::sched {

class IterationCostModel {
 public:
  struct Fit {
    double fixed_seconds = 0;      ///< Cost of an iteration regardless of its tokens.
    double per_token_seconds = 0;  ///< Marginal cost of one more token (> 0).
    /// Predicted duration of an iteration of `num_tokens` tokens.
    double Seconds(int64_t num_tokens) const { return fixed_seconds + per_token_seconds * num_tokens; }
  };

  /// `half_life`: observations this many iterations old weigh half as much as the newest
  /// (>= 1).
  explicit IterationCostModel(double half_life = 256);

  /// One returned iteration: `num_tokens` computed in `duration` (from its scheduling to its
  /// results). Once a fit exists, a duration above twice the prediction counts as twice the
  /// prediction, so that one stall of the machine does not teach the model that tokens are
  /// expensive.
  void Observe(int64_t num_tokens, absl::Duration duration);

  /// The current fit; nullopt until it is determined: at least kMinObservations
  /// iterations, token counts that vary (weighted standard deviation >= 1 token), and a
  /// positive cost per token.
  std::optional<Fit> fit() const;

  static constexpr int64_t kMinObservations = 32;

 private:
  double decay_;
  int64_t num_observations_ = 0;
  // Weighted sums over observations (x = tokens, y = seconds).
  double sum_w_ = 0, sum_x_ = 0, sum_xx_ = 0, sum_y_ = 0, sum_xy_ = 0;
};

}  // namespace orca::sched
