#include "services/operator/kube_client.h"

#include <curl/curl.h>

#include <mutex>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "services/operator/json_yaml.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

constexpr char kHttpCodePayload[] = "orca.dev/k8s-http-code";

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::StatusCode CodeForHttp(int code, const std::string& reason) {
  switch (code) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return code >= 500 ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnknown;
  }
}

// Error from a non-2xx response; uses the metav1.Status body when there is one.
// (Context goes into the message here: Annotate() would drop the HTTP-code payload.)
absl::Status ErrorFromResponse(long code, const std::string& body, const std::string& context) {
  std::string reason, message;
  auto parsed = ParseJson(body);
  if (parsed.ok() && parsed->is_object()) {
    reason = parsed->value("reason", "");
    message = parsed->value("message", "");
  }
  if (message.empty()) message = body.substr(0, 512);
  return HttpError(static_cast<int>(code), reason, absl::StrCat(context, ": ", message));
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const std::function<bool(const char*, size_t, long)>* on_data = nullptr;
  std::string body;
  CURL* curl = nullptr;
  bool stopped_by_callback = false;
  const absl::Notification* cancel = nullptr;
};

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->on_data && *t->on_data) {
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code / 100 == 2) {
      if (!(*t->on_data)(data, n, code)) {
        t->stopped_by_callback = true;
        return 0;  // aborts the transfer
      }
      return n;
    }
  }
  t->body.append(data, n);
  return n;
}

int ProgressCallback(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return t->cancel && t->cancel->HasBeenNotified() ? 1 : 0;
}

// Sets a PEM blob option (libcurl copies the bytes).
void SetBlob(CURL* curl, CURLoption option, const std::string& data) {
  curl_blob blob{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
  curl_easy_setopt(curl, option, &blob);
}

}  // namespace

int HttpCodeOf(const absl::Status& status) {
  auto payload = status.GetPayload(kHttpCodePayload);
  if (!payload) return 0;
  int code = 0;
  for (char c : std::string(*payload)) code = code * 10 + (c - '0');
  return code;
}

absl::Status HttpError(int code, const std::string& reason, const std::string& message) {
  absl::Status status(CodeForHttp(code, reason),
                      absl::StrCat("HTTP ", code, reason.empty() ? "" : " " + reason, ": ", message));
  status.SetPayload(kHttpCodePayload, absl::Cord(std::to_string(code)));
  return status;
}

std::string ResourcePath(const std::string& api_version, const std::string& plural, const std::string& namespace_,
                         const std::string& name, const std::string& subresource) {
  std::string path = api_version.find('/') == std::string::npos ? absl::StrCat("/api/", api_version)
                                                                : absl::StrCat("/apis/", api_version);
  if (!namespace_.empty()) absl::StrAppend(&path, "/namespaces/", namespace_);
  absl::StrAppend(&path, "/", plural);
  if (!name.empty()) absl::StrAppend(&path, "/", name);
  if (!subresource.empty()) absl::StrAppend(&path, "/", subresource);
  return path;
}

std::string PluralForKind(const std::string& kind) {
  static const std::pair<const char*, const char*> kKinds[] = {
      {"ConfigMap", "configmaps"},
      {"Service", "services"},
      {"StatefulSet", "statefulsets"},
      {"Deployment", "deployments"},
      {"ServiceMonitor", "servicemonitors"},
      {"PodDisruptionBudget", "poddisruptionbudgets"},
      {"NetworkPolicy", "networkpolicies"},
      {"Lease", "leases"},
      {"Event", "events"},
      {"OrcaDeployment", "orcadeployments"},
      {"Secret", "secrets"},
  };
  for (const auto& [k, plural] : kKinds) {
    if (kind == k) return plural;
  }
  return "";
}

absl::StatusOr<std::string> ObjectPath(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return absl::InvalidArgumentError("object has no metadata");
  }
  const std::string kind = object.value("kind", "");
  const std::string plural = PluralForKind(kind);
  if (plural.empty()) return absl::InvalidArgumentError(absl::StrCat("unknown kind '", kind, "'"));
  const json& meta = object["metadata"];
  return ResourcePath(object.value("apiVersion", ""), plural, meta.value("namespace", ""), meta.value("name", ""));
}

absl::StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(Options options) {
  GlobalInit();
  if (options.config.server.rfind("https://", 0) != 0 && options.config.server.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("API server '", options.config.server, "' must start with https:// (or http:// for tests)"));
  }
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(options)));
}

KubeClient::~KubeClient() = default;

absl::StatusOr<KubeClient::Response> KubeClient::Perform(const std::string& method, const std::string& path_and_query,
                                                         const std::string& body, const std::string& content_type,
                                                         int timeout_seconds,
                                                         const std::function<bool(const char*, size_t, long)>& on_data,
                                                         const absl::Notification* cancel) {
  const KubeConfig& cfg = options_.config;
  std::string token = cfg.token;
  if (token.empty() && !cfg.token_file.empty()) {
    ORCA_ASSIGN_OR_RETURN(token, ReadFileToString(cfg.token_file));
    while (!token.empty() && isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  }
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  CURL* h = curl.get();
  const std::string url = cfg.server + path_and_query;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, static_cast<long>(timeout_seconds));
  curl_easy_setopt(h, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (method != "GET") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  if (!content_type.empty()) headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers, &curl_slist_free_all);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

  if (!cfg.ca_data.empty()) SetBlob(h, CURLOPT_CAINFO_BLOB, cfg.ca_data);
  if (!cfg.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, cfg.ca_file.c_str());
  if (cfg.insecure_skip_tls_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!cfg.client_cert_data.empty()) SetBlob(h, CURLOPT_SSLCERT_BLOB, cfg.client_cert_data);
  if (!cfg.client_cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, cfg.client_cert_file.c_str());
  if (!cfg.client_key_data.empty()) SetBlob(h, CURLOPT_SSLKEY_BLOB, cfg.client_key_data);
  if (!cfg.client_key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, cfg.client_key_file.c_str());

  Transfer transfer;
  transfer.on_data = &on_data;
  transfer.curl = h;
  transfer.cancel = cancel;
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &WriteCallback);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
  if (cancel) {
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &ProgressCallback);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer);
  }

  const CURLcode rc = curl_easy_perform(h);
  Response response;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.code);
  response.body = std::move(transfer.body);
  if (rc == CURLE_WRITE_ERROR && transfer.stopped_by_callback) return response;
  if (rc == CURLE_ABORTED_BY_CALLBACK)
    return absl::CancelledError(absl::StrCat(method, " ", path_and_query, ": cancelled"));
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(method, " ", url, ": ", curl_easy_strerror(rc)));
  }
  return response;
}

absl::StatusOr<json> KubeClient::JsonCall(const std::string& method, const std::string& path_and_query,
                                          const std::string& body, const std::string& content_type) {
  ORCA_ASSIGN_OR_RETURN(Response r, Perform(method, path_and_query, body, content_type,
                                            options_.request_timeout_seconds, nullptr, nullptr));
  if (r.code / 100 != 2) return ErrorFromResponse(r.code, r.body, method + " " + path_and_query);
  if (r.body.empty()) return json::object();
  return ParseJson(r.body);
}

absl::StatusOr<json> KubeClient::Get(const std::string& path) { return JsonCall("GET", path, "", ""); }

absl::StatusOr<json> KubeClient::List(const std::string& collection_path, const ListOptions& options) {
  std::string query;
  if (!options.label_selector.empty()) absl::StrAppend(&query, "&labelSelector=", UrlEncode(options.label_selector));
  if (!options.resource_version.empty())
    absl::StrAppend(&query, "&resourceVersion=", UrlEncode(options.resource_version));
  if (!query.empty()) query[0] = '?';
  return JsonCall("GET", collection_path + query, "", "");
}

absl::Status KubeClient::Watch(const std::string& collection_path, const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& on_event,
                               const absl::Notification* cancel) {
  std::string query = absl::StrCat("?watch=1&timeoutSeconds=", options.timeout_seconds);
  if (options.allow_bookmarks) absl::StrAppend(&query, "&allowWatchBookmarks=true");
  if (!options.label_selector.empty()) absl::StrAppend(&query, "&labelSelector=", UrlEncode(options.label_selector));
  if (!options.resource_version.empty())
    absl::StrAppend(&query, "&resourceVersion=", UrlEncode(options.resource_version));

  std::string pending;  // bytes of an incomplete line
  absl::Status stream_error;
  auto on_data = [&](const char* data, size_t n, long) -> bool {
    pending.append(data, n);
    size_t start = 0;
    for (size_t nl = pending.find('\n', start); nl != std::string::npos; nl = pending.find('\n', start)) {
      const std::string line = pending.substr(start, nl - start);
      start = nl + 1;
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      auto parsed = ParseJson(line);
      if (!parsed.ok() || !parsed->is_object()) {
        stream_error =
            absl::DataLossError(absl::StrCat("watch ", collection_path, ": bad event line: ", line.substr(0, 200)));
        return false;
      }
      WatchEvent event{parsed->value("type", ""), parsed->contains("object") ? (*parsed)["object"] : json::object()};
      if (event.type == "ERROR") {
        // The object is a metav1.Status; 410 Gone means the resourceVersion is too old.
        const int code = event.object.value("code", 500);
        stream_error = HttpError(code, event.object.value("reason", ""), event.object.value("message", "watch error"));
        return false;
      }
      if (!on_event(event)) return false;
    }
    pending.erase(0, start);
    return true;
  };
  ORCA_ASSIGN_OR_RETURN(Response r,
                        Perform("GET", collection_path + query, "", "", options.timeout_seconds + 30, on_data, cancel));
  if (r.code / 100 != 2) return ErrorFromResponse(r.code, r.body, "watch " + collection_path);
  return stream_error;
}

absl::StatusOr<json> KubeClient::Create(const std::string& collection_path, const json& object) {
  return JsonCall("POST", collection_path, object.dump(), "application/json");
}

absl::StatusOr<json> KubeClient::Replace(const std::string& path, const json& object) {
  return JsonCall("PUT", path, object.dump(), "application/json");
}

absl::StatusOr<json> KubeClient::Apply(const std::string& path, const json& object, const std::string& field_manager,
                                       bool force) {
  // JSON is valid YAML: the apply-patch content type accepts it as is.
  const std::string query = absl::StrCat("?fieldManager=", UrlEncode(field_manager), force ? "&force=true" : "");
  return JsonCall("PATCH", path + query, object.dump(), "application/apply-patch+yaml");
}

absl::Status KubeClient::Delete(const std::string& path) {
  // Background propagation: the garbage collector removes the workload's pods afterwards.
  return JsonCall("DELETE", path + "?propagationPolicy=Background", "", "").status();
}

}  // namespace orca::k8s
