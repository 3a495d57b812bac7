#include "services/operator/informer.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

std::string MetaString(const json& object, const char* key) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& m = object["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

}  // namespace

Informer::Informer(KubeClient* client, Options options, Handler handler)
    : client_(client), options_(std::move(options)), handler_(std::move(handler)) {}

std::string Informer::KeyOf(const json& object) {
  return absl::StrCat(MetaString(object, "namespace"), "/", MetaString(object, "name"));
}

std::optional<json> Informer::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<json> out;
  for (const auto& [key, obj] : cache_) out.push_back(obj);
  return out;
}

std::string Informer::resource_version() const {
  absl::MutexLock lock(&mu_);
  return resource_version_;
}

void Informer::Store(const std::string& type, const json& object) {
  {
    absl::MutexLock lock(&mu_);
    if (type == "DELETED") {
      cache_.erase(KeyOf(object));
    } else {
      cache_[KeyOf(object)] = object;
    }
    const std::string rv = MetaString(object, "resourceVersion");
    if (!rv.empty()) resource_version_ = rv;
  }
  handler_(type, object);
}

absl::Status Informer::ListOnce() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  auto list = client_->List(options_.collection_path, list_options);
  if (!list.ok()) return list.status();
  if (!list->contains("items") || !(*list)["items"].is_array()) {
    return absl::DataLossError(absl::StrCat("list ", options_.collection_path, ": no items"));
  }
  std::set<std::string> present;
  std::vector<json> vanished;
  {
    absl::MutexLock lock(&mu_);
    for (const json& item : (*list)["items"]) present.insert(KeyOf(item));
    for (const auto& [key, obj] : cache_) {
      if (!present.count(key)) vanished.push_back(obj);
    }
    cache_.clear();
    for (const json& item : (*list)["items"]) cache_[KeyOf(item)] = item;
    resource_version_ = MetaString(*list, "resourceVersion");
  }
  ++list_count_;
  synced_ = true;
  for (const json& obj : vanished) handler_("DELETED", obj);
  for (const json& item : (*list)["items"]) handler_("ADDED", item);
  return absl::OkStatus();
}

absl::Status Informer::WatchOnce(const absl::Notification* stop) {
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.resource_version = resource_version();
  watch_options.timeout_seconds = options_.watch_timeout_seconds;
  return client_->Watch(
      options_.collection_path, watch_options,
      [&](const WatchEvent& event) {
        if (event.type == "BOOKMARK") {
          absl::MutexLock lock(&mu_);
          const std::string rv = MetaString(event.object, "resourceVersion");
          if (!rv.empty()) resource_version_ = rv;
        } else if (event.type == "ADDED" || event.type == "MODIFIED" || event.type == "DELETED") {
          Store(event.type, event.object);
        }
        return !stop->HasBeenNotified();
      },
      stop);
}

void Informer::Run(const absl::Notification* stop) {
  bool need_list = true;
  std::string listed_version;  // the version of the last list
  absl::Duration backoff = options_.initial_backoff;
  auto sleep_backoff = [&] {
    stop->WaitForNotificationWithTimeout(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  };
  while (!stop->HasBeenNotified()) {
    if (need_list) {
      absl::Status st = ListOnce();
      if (!st.ok()) {
        ORCA_LOG(WARNING).With("collection", options_.collection_path) << "list failed: " << st.message();
        sleep_backoff();
        continue;
      }
      need_list = false;
      listed_version = resource_version();
    }
    absl::Status st = WatchOnce(stop);
    const bool just_listed = resource_version() == listed_version;
    if (st.ok()) {
      backoff = options_.initial_backoff;  // the server ended a healthy watch: resume from rv
      continue;
    }
    if (absl::IsCancelled(st) || stop->HasBeenNotified()) break;
    const int code = HttpCodeOf(st);
    if (code == 410) {
      // Our resourceVersion was compacted away: start over from a fresh list
      // (after a pause when even a fresh list's version was refused).
      ORCA_LOG(INFO).With("collection", options_.collection_path) << "watch expired (410 Gone), re-listing";
      if (just_listed) sleep_backoff();
      need_list = true;
      continue;
    }
    ORCA_LOG(WARNING).With("collection", options_.collection_path) << "watch failed: " << st.message();
    if (code >= 400 && code < 500) need_list = true;  // e.g. RBAC changed: the cache may be stale
    sleep_backoff();
  }
}

}  // namespace orca::k8s
