#pragma once
/// The scheduler's request pool, in arrival order (paper §4.2, Algorithm 1's `pool`).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "core/sched/request.h"

namespace orca::sched {

/// Owns every request the scheduler still tracks, iterable in arrival order. Request ids are
/// assigned in arrival order, so id order is arrival order. A finished request stays here
/// until its completion is delivered (the request-level baseline holds finished members
/// until their batch ends).
class RequestPool {
 public:
  using Map = absl::btree_map<RequestId, std::unique_ptr<Request>>;

  /// Adds a request; its id must be larger than every id added before (checked).
  void Add(std::unique_ptr<Request> request);
  /// nullptr when unknown (never added, or removed).
  [[nodiscard]] Request* Find(RequestId id);
  [[nodiscard]] const Request* Find(RequestId id) const;
  /// The unfinished request with this non-empty caller id, if any.
  [[nodiscard]] std::optional<RequestId> FindByCallerId(const std::string& caller_id) const;
  /// Removes and destroys the request (no-op when unknown).
  void Remove(RequestId id);

  /// Arrival-order iteration: each element is (id, unique_ptr<Request>).
  Map::const_iterator begin() const { return requests_.begin(); }
  Map::const_iterator end() const { return requests_.end(); }
  std::size_t size() const { return requests_.size(); }
  bool empty() const { return requests_.empty(); }

 private:
  Map requests_;
  absl::flat_hash_map<std::string, RequestId> by_caller_id_;
  RequestId last_id_ = 0;
};

}  // namespace orca::sched
