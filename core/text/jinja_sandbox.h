#pragma once
/// The per-render sandbox of the Jinja interpreter (internal to core/text):
/// it enforces a RenderBudget (steps, output, string/list sizes, allocation,
/// nesting, deadline), does Python's integer arithmetic with overflow checks,
/// and owns every recursive walk over values (str, repr, JSON, equality), each
/// bounded by depth and size. One Sandbox per render; nothing is shared.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/text/jinja_value.h"
#include "core/text/render_budget.h"

namespace orca::text::jinja {

/// Bytes a list or dict element counts against RenderBudget::max_alloc_bytes.
inline constexpr int64_t kAllocBytesPerItem = sizeof(Value);

class Sandbox {
 public:
  explicit Sandbox(const RenderBudget& budget);
  /// Empties every list and namespace the template mutated (see NoteMutated),
  /// so that cycles (`x.append(x)`) are freed and no chain of appended lists
  /// is destroyed recursively.
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const RenderBudget& budget() const { return budget_; }
  int64_t steps() const { return steps_; }

  /// Counts `n` steps; checks max_steps and, every deadline_check_steps, the deadline.
  absl::Status Step(int64_t n = 1) {
    steps_ += n;
    if (ABSL_PREDICT_FALSE(steps_ >= next_check_)) return SlowStep();
    return absl::OkStatus();
  }
  /// Linear work over `bytes` bytes of text that keeps nothing (search,
  /// comparison, decoding): a step per `bytes_per_step` bytes, charged before
  /// the work. 64 bytes cost about what an ordinary step does.
  absl::Status Scan(size_t bytes, size_t bytes_per_step = 64) {
    return Step(static_cast<int64_t>(bytes / bytes_per_step));
  }
  /// A string of `bytes` is about to be built: checks max_string_bytes and charges max_alloc_bytes.
  absl::Status ChargeString(size_t bytes);
  /// A list or dict of `n` elements is about to be built: checks max_items and charges max_alloc_bytes.
  absl::Status ChargeItems(size_t n);
  /// A value just built: lists and dicts may not nest deeper than max_value_depth.
  absl::Status CheckDepth(const Value& v) const {
    if (ABSL_PREDICT_FALSE(v.depth() > budget_.max_value_depth)) return DepthError();
    return absl::OkStatus();
  }
  /// Output is about to grow to `size` bytes: checks max_output_bytes.
  absl::Status CheckOutput(size_t size) const;
  /// Records a list or namespace the template changes in place (append, `set ns.x`).
  void NoteMutated(const Value& container);

  /// Enters one level of nested evaluation (max_eval_depth); pair with Leave().
  absl::Status Enter() {
    if (ABSL_PREDICT_FALSE(++eval_depth_ > budget_.max_eval_depth)) {
      --eval_depth_;
      return EvalDepthError();
    }
    return absl::OkStatus();
  }
  void Leave() { --eval_depth_; }

  // ---- Bounded walks over values ----------------------------------------
  /// Python str(): the text of a string, repr of lists and dicts.
  absl::StatusOr<std::string> Str(const Value& v);
  /// Python repr().
  absl::StatusOr<std::string> Repr(const Value& v);
  /// transformers' `tojson` (json.dumps, ensure_ascii=False); indent < 0: one line.
  absl::StatusOr<std::string> ToJson(const Value& v, int64_t indent);
  /// Python `==`; each compared node is a step.
  absl::StatusOr<bool> Equal(const Value& a, const Value& b);
  /// Items of an iterable (list elements, dict keys, string characters);
  /// undefined and none are empty; checks max_items.
  absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

  absl::Status DepthError() const;

 private:
  absl::Status SlowStep();
  absl::Status EvalDepthError() const;
  absl::Status AppendRepr(const Value& v, int depth, std::string* out);
  absl::Status AppendJson(const Value& v, int64_t indent, int depth, std::string* out);
  absl::StatusOr<bool> EqualAt(const Value& a, const Value& b, int depth);
  absl::Status CheckBuilt(const std::string& out) const;

  RenderBudget budget_;
  int64_t steps_ = 0;
  int64_t next_check_ = 0;  // the step count at which SlowStep runs next
  int64_t alloc_bytes_ = 0;
  int eval_depth_ = 0;
  absl::flat_hash_set<const void*> mutated_seen_;
  std::vector<Value> mutated_;
};

/// RAII for Sandbox::Enter/Leave.
class DepthScope {
 public:
  explicit DepthScope(Sandbox& sandbox) : sandbox_(sandbox), status_(sandbox.Enter()) {}
  ~DepthScope() {
    if (status_.ok()) sandbox_.Leave();
  }
  DepthScope(const DepthScope&) = delete;
  DepthScope& operator=(const DepthScope&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  Sandbox& sandbox_;
  absl::Status status_;
};

// ---- Checked integer arithmetic (Python semantics; overflow is an error) ---
absl::StatusOr<int64_t> CheckedAdd(int64_t a, int64_t b);
absl::StatusOr<int64_t> CheckedSub(int64_t a, int64_t b);
absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b);
/// Floored division `a // b`; errors: b == 0, INT64_MIN // -1.
absl::StatusOr<int64_t> CheckedFloorDiv(int64_t a, int64_t b);
/// Floored modulo `a % b` (sign of b); error: b == 0. INT64_MIN % -1 is 0.
absl::StatusOr<int64_t> CheckedFloorMod(int64_t a, int64_t b);
/// `a ** b` for b >= 0.
absl::StatusOr<int64_t> CheckedPow(int64_t a, int64_t b);
absl::StatusOr<int64_t> CheckedNeg(int64_t a);
/// Python int(float): truncates; NaN, infinities and values outside int64 are errors.
absl::StatusOr<int64_t> CheckedToInt(double f);
/// Number of code points of UTF-8 text as DecodeUtf8 counts them (ill-formed
/// sequences become one U+FFFD each), without decoding valid text.
size_t CountCodePoints(std::string_view text);
/// Number of elements of range(start, stop, step) (step != 0), without overflow.
uint64_t RangeLength(int64_t start, int64_t stop, int64_t step);

}  // namespace orca::text::jinja
