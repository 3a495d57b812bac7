#pragma once
/// The order in which requests are served: arrival (FCFS), or priority with aging.

#include "absl/time/time.h"
#include "core/sched/request.h"
#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// A strict total order on requests; "a before b" means a is admitted (and scheduled)
/// first and preempted last.
///
/// kFcfs: arrival order (request ids).
///
/// kPriority with aging A > 0: by the virtual deadline arrival + priority × A, then
/// arrival. Equivalently, a waiting request gains one priority level per A of waiting, so
/// the order never changes over time and is a plain sort. Starvation bound: a request R
/// (priority p, arrival t) is ordered after another request S only if S arrived before
/// t + (p − p_S) × A <= t + (p − p_min) × A, where p_min is the lowest priority any request
/// has. So only the finitely many requests that arrive in that window can ever be admitted
/// before R or preempt it; every later arrival queues behind R. (Each of those finishes in
/// bounded time, as every request is bounded by max_new_tokens.)
///
/// kPriority with A = 0: strict priority, then arrival; a steady stream of urgent requests
/// can starve a less urgent one forever (no bound).
class RequestOrder {
 public:
  /// What the order looks at.
  struct Key {
    RequestId id = 0;
    int32_t priority = 0;
    absl::Time arrival;
  };
  static Key KeyOf(const Request& r) { return Key{r.id(), r.priority(), r.arrival_time()}; }

  RequestOrder(SchedulingOrder order, absl::Duration priority_aging) : order_(order), priority_aging_(priority_aging) {}

  SchedulingOrder order() const { return order_; }
  absl::Duration priority_aging() const { return priority_aging_; }

  /// True when `a` is served before `b`.
  bool Before(const Key& a, const Key& b) const {
    if (order_ == SchedulingOrder::kPriority) {
      if (priority_aging_ > absl::ZeroDuration()) {
        const absl::Time da = VirtualDeadline(a), db = VirtualDeadline(b);
        if (da != db) return da < db;
      } else if (a.priority != b.priority) {
        return a.priority < b.priority;
      }
    }
    return a.id < b.id;
  }
  bool Before(const Request& a, const Request& b) const { return Before(KeyOf(a), KeyOf(b)); }

  /// Priority mode with aging: arrival + priority × aging.
  absl::Time VirtualDeadline(const Key& k) const {
    return k.arrival + priority_aging_ * static_cast<int64_t>(k.priority);
  }

 private:
  SchedulingOrder order_;
  absl::Duration priority_aging_;
};

}  // namespace orca::sched
