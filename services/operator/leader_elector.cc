#include "services/operator/leader_elector.h"

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

std::string SpecString(const json& lease, const char* key) {
  if (!lease.contains("spec") || !lease["spec"].is_object()) return "";
  const json& s = lease["spec"];
  return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "";
}

}  // namespace

LeaderElector::LeaderElector(KubeClient* client, Options options) : client_(client), options_(std::move(options)) {}

std::string LeaderElector::FormatMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

std::string LeaderElector::LeasePath() const {
  return ResourcePath("coordination.k8s.io/v1", "leases", options_.namespace_, options_.lease_name);
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

absl::StatusOr<bool> LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = options_.clock();
  const std::string now_text = FormatMicroTime(now);
  const int64_t duration_s = absl::ToInt64Seconds(options_.lease_duration);
  auto current = client_->Get(LeasePath());
  if (absl::IsNotFound(current.status())) {
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.lease_name}, {"namespace", options_.namespace_}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", duration_s},
                    {"acquireTime", now_text},
                    {"renewTime", now_text},
                    {"leaseTransitions", 0}}}};
    auto created = client_->Create(ResourcePath("coordination.k8s.io/v1", "leases", options_.namespace_), lease);
    absl::MutexLock lock(&mu_);
    if (absl::IsAlreadyExists(created.status()) || HttpCodeOf(created.status()) == 409) return leader_ = false;
    if (!created.ok()) return created.status();
    observed_holder_ = options_.identity;
    observed_renew_time_ = now_text;
    observed_at_ = last_renew_ = now;
    return leader_ = true;
  }
  if (!current.ok()) return current.status();

  const std::string holder = SpecString(*current, "holderIdentity");
  {
    absl::MutexLock lock(&mu_);
    const std::string renew = SpecString(*current, "renewTime");
    if (holder != observed_holder_ || renew != observed_renew_time_) {
      observed_holder_ = holder;
      observed_renew_time_ = renew;
      observed_at_ = now;
    }
    if (!holder.empty() && holder != options_.identity && observed_at_ + options_.lease_duration > now) {
      return leader_ = false;  // held by someone who renewed within the lease duration
    }
  }
  json lease = *current;
  json& spec = lease["spec"];
  if (!spec.is_object()) spec = json::object();
  if (holder != options_.identity) {
    spec["acquireTime"] = now_text;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = duration_s;
  spec["renewTime"] = now_text;
  auto updated = client_->Replace(LeasePath(), lease);
  absl::MutexLock lock(&mu_);
  if (HttpCodeOf(updated.status()) == 409) return leader_ = false;  // another candidate wrote first
  if (!updated.ok()) return updated.status();
  observed_holder_ = options_.identity;
  observed_renew_time_ = now_text;
  observed_at_ = last_renew_ = now;
  return leader_ = true;
}

absl::Status LeaderElector::Release() {
  if (!IsLeader()) return absl::OkStatus();
  auto current = client_->Get(LeasePath());
  if (!current.ok()) return current.status();
  if (SpecString(*current, "holderIdentity") != options_.identity) {
    absl::MutexLock lock(&mu_);
    leader_ = false;
    return absl::OkStatus();
  }
  json lease = *current;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = FormatMicroTime(options_.clock());
  auto updated = client_->Replace(LeasePath(), lease);
  absl::MutexLock lock(&mu_);
  leader_ = false;
  return updated.status();
}

void LeaderElector::Run(const absl::Notification* stop, const std::function<void()>& on_started_leading,
                        const std::function<void()>& on_stopped_leading) {
  // Campaign.
  while (!stop->HasBeenNotified()) {
    auto won = TryAcquireOrRenew();
    if (!won.ok()) ORCA_LOG(WARNING) << "leader election: " << won.status().message();
    if (won.ok() && *won) break;
    stop->WaitForNotificationWithTimeout(options_.retry_period);
  }
  if (stop->HasBeenNotified()) return;
  ORCA_LOG(INFO).With("lease", options_.lease_name) << options_.identity << " became the leader";
  on_started_leading();
  // Renew.
  while (!stop->WaitForNotificationWithTimeout(options_.retry_period)) {
    auto renewed = TryAcquireOrRenew();
    if (renewed.ok() && *renewed) continue;
    if (!renewed.ok()) ORCA_LOG(WARNING) << "leader election: renew failed: " << renewed.status().message();
    absl::Time last;
    {
      absl::MutexLock lock(&mu_);
      last = last_renew_;
    }
    if ((renewed.ok() && !*renewed) || options_.clock() - last > options_.renew_deadline) {
      ORCA_LOG(ERROR).With("lease", options_.lease_name) << options_.identity << " lost the lease";
      {
        absl::MutexLock lock(&mu_);
        leader_ = false;
      }
      on_stopped_leading();
      return;
    }
  }
  if (absl::Status st = Release(); !st.ok()) ORCA_LOG(WARNING) << "leader election: release failed: " << st.message();
}

}  // namespace orca::k8s
