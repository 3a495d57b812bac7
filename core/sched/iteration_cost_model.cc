#include "core/sched/iteration_cost_model.h"

#include <algorithm>
#include <cmath>

namespace orca::sched {

IterationCostModel::IterationCostModel(double half_life) : decay_(std::exp2(-1.0 / std::max(1.0, half_life))) {}

void IterationCostModel::Observe(int64_t num_tokens, absl::Duration duration) {
  const auto x = static_cast<double>(std::max<int64_t>(0, num_tokens));
  double y = std::max(0.0, absl::ToDoubleSeconds(duration));
  if (std::optional<Fit> f = fit()) y = std::min(y, 2 * f->Seconds(num_tokens));
  sum_w_ = sum_w_ * decay_ + 1;
  sum_x_ = sum_x_ * decay_ + x;
  sum_xx_ = sum_xx_ * decay_ + x * x;
  sum_y_ = sum_y_ * decay_ + y;
  sum_xy_ = sum_xy_ * decay_ + x * y;
  ++num_observations_;
}

std::optional<IterationCostModel::Fit> IterationCostModel::fit() const {
  if (num_observations_ < kMinObservations) return std::nullopt;
  const double mean_x = sum_x_ / sum_w_;
  const double var_x = sum_xx_ / sum_w_ - mean_x * mean_x;
  if (var_x < 1.0) return std::nullopt;
  const double mean_y = sum_y_ / sum_w_;
  const double cov_xy = sum_xy_ / sum_w_ - mean_x * mean_y;
  const double per_token = cov_xy / var_x;
  if (!(per_token > 0)) return std::nullopt;
  return Fit{std::max(0.0, mean_y - per_token * mean_x), per_token};
}

}  // namespace orca::sched
