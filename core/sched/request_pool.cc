#include "core/sched/request_pool.h"

#include <utility>

#include "core/common/logging.h"

namespace orca::sched {

void RequestPool::Add(std::unique_ptr<Request> request) {
  const RequestId id = request->id();
  ORCA_CHECK(id > last_id_) << "request ids must increase in arrival order: " << id << " after " << last_id_;
  last_id_ = id;
  if (!request->caller_id().empty()) by_caller_id_[request->caller_id()] = id;
  requests_.emplace(id, std::move(request));
}

Request* RequestPool::Find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

const Request* RequestPool::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::optional<RequestId> RequestPool::FindByCallerId(const std::string& caller_id) const {
  auto it = by_caller_id_.find(caller_id);
  if (it == by_caller_id_.end()) return std::nullopt;
  const Request* request = Find(it->second);
  if (request == nullptr || request->finished()) return std::nullopt;
  return it->second;
}

void RequestPool::Remove(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const std::string& caller_id = it->second->caller_id();
  if (!caller_id.empty()) {
    auto by_caller = by_caller_id_.find(caller_id);
    if (by_caller != by_caller_id_.end() && by_caller->second == id) by_caller_id_.erase(by_caller);
  }
  requests_.erase(it);
}

}  // namespace orca::sched
