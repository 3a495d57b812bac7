// orca-operator: reconciles OrcaDeployment objects into the gateway, scheduler
// and worker workloads (see renderer.h for the topology).
//
//   orca-operator                          in-cluster, all namespaces, leader election
//   orca-operator --kubeconfig ~/.kube/config --namespace demo --no-leader-elect
//   orca-operator --render deploy/examples/orca-cpu-tiny.yaml   print the objects and exit
//   helm template ... | orca-operator --post-render              operator-less: OrcaDeployments
//                                                                become objects, the rest passes

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "services/common/internal_token.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/operator/controller.h"
#include "services/operator/event_recorder.h"
#include "services/operator/json_yaml.h"
#include "services/operator/leader_elector.h"
#include "services/operator/manifest_renderer.h"
#include "services/operator/operator_admin_server.h"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/renderer.h"

namespace orca::k8s {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string context;
  std::string namespace_;
  bool leader_elect = true;
  std::string leader_election_namespace;
  std::string leader_election_id = "orca-operator-leader";
  std::string http_listen = "0.0.0.0:8080";
  std::string cluster_domain = "cluster.local";
  std::string field_manager = "orca-operator";
  int64_t resync_seconds = 300;
  int64_t watch_timeout_seconds = 300;
  bool manage_service_monitors = true;
  std::string scheduler_discovery = "dns";
  std::string render;
  bool post_render = false;
  std::string render_format = "yaml";
  services::LoggingFlags logging;
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

RenderOptions RenderOptionsFrom(const Flags& flags) {
  RenderOptions options;
  options.cluster_domain = flags.cluster_domain;
  options.service_monitors = flags.manage_service_monitors;
  options.scheduler_discovery =
      flags.scheduler_discovery == "dns" ? SchedulerDiscovery::kDns : SchedulerDiscovery::kList;
  return options;
}

// --render FILE|- and --post-render: print what the OrcaDeployment(s) become.
absl::Status Render(const Flags& flags) {
  std::string text;
  const std::string source = flags.post_render ? "-" : flags.render;
  if (source == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    ORCA_ASSIGN_OR_RETURN(text, ReadFileToString(source));
  }
  auto docs = ParseYamlDocuments(text);
  if (!docs.ok()) return Annotate(docs.status(), source == "-" ? "standard input" : source);
  // --render draws a token for a deployment without its own Secret; the post-renderer cannot (see manifest_renderer.h).
  const TokenSource draw_token = flags.post_render ? TokenSource() : TokenSource(services::GenerateInternalToken);
  auto all = RenderManifests(*docs, RenderOptionsFrom(flags), /*keep_others=*/flags.post_render, draw_token);
  if (!all.ok()) return Annotate(all.status(), source == "-" ? "standard input" : source);
  if (flags.render_format == "json") {
    std::cout << nlohmann::json(*all).dump(2) << "\n";
  } else {
    for (const nlohmann::json& obj : *all) std::cout << "---\n" << ToYaml(obj);
  }
  return absl::OkStatus();
}

// The operator's stop: set by a termination signal, a lost Lease or the end of Run, whichever comes first (Notify
// runs once however many of them race).
class StopSignal {
 public:
  void Notify() {
    std::call_once(once_, [this] { stop_.Notify(); });
  }
  absl::Notification* notification() { return &stop_; }

 private:
  std::once_flag once_;
  absl::Notification stop_;
};

// SIGTERM/SIGINT/SIGHUP end the process cleanly (the Lease is released): the returned thread turns the first one into
// `stop` and returns once `stop` is set, whatever set it. Termination signals must already be blocked.
std::thread StartSignalWatcher(StopSignal* stop) {
  return std::thread([stop] {
    while (!stop->notification()->HasBeenNotified()) {
      if (const int sig = services::WaitForTerminationSignal(std::chrono::milliseconds(200)); sig != 0) {
        ORCA_LOG(INFO) << "signal " << sig << ": shutting down";
        stop->Notify();
      }
    }
  });
}

absl::StatusOr<KubeClient::Options> ClientOptionsFrom(const Flags& flags) {
  KubeClient::Options client_options;
  if (flags.kubeconfig.empty()) {
    ORCA_ASSIGN_OR_RETURN(client_options.config, LoadInClusterConfig());
  } else {
    ORCA_ASSIGN_OR_RETURN(client_options.config, LoadKubeConfigFile(flags.kubeconfig, flags.context));
  }
  return client_options;
}

// This replica's name among the candidates: $POD_NAME, else host-pid.
std::string CandidateIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return EnvOr("POD_NAME", absl::StrCat(host, "-", getpid()));
}

Controller::Options ControllerOptionsFrom(const Flags& flags) {
  Controller::Options controller_options;
  controller_options.namespace_ = flags.namespace_;
  controller_options.reconciler.field_manager = flags.field_manager;
  controller_options.reconciler.render = RenderOptionsFrom(flags);
  controller_options.resync_period = absl::Seconds(flags.resync_seconds);
  controller_options.watch_timeout_seconds = static_cast<int>(flags.watch_timeout_seconds);
  return controller_options;
}

// The Lease lives in --leader-election-namespace, else $POD_NAMESPACE, else the kubeconfig's namespace, else default.
LeaderElector::Options LeaderElectionOptionsFrom(const Flags& flags, const std::string& config_namespace,
                                                 const std::string& identity) {
  LeaderElector::Options le;
  le.namespace_ = flags.leader_election_namespace.empty()
                      ? EnvOr("POD_NAMESPACE", config_namespace.empty() ? "default" : config_namespace)
                      : flags.leader_election_namespace;
  le.lease_name = flags.leader_election_id;
  le.identity = identity;
  return le;
}

// Runs the controller until `stop`: at once without leader election, else only while this replica holds the Lease.
// Losing the Lease sets `stop` and is an error, so that a fresh replica campaigns.
absl::Status RunController(const Flags& flags, const LeaderElector::Options& election, KubeClient* client,
                           Controller* controller, OperatorMetrics* metrics, std::atomic<bool>* leading,
                           StopSignal* stop) {
  absl::Status result = absl::OkStatus();
  std::thread controller_thread;
  if (!flags.leader_elect) {
    controller_thread = std::thread([&] { controller->Run(stop->notification()); });
  } else {
    LeaderElector elector(client, election);
    elector.Run(
        stop->notification(),
        [&] {
          *leading = true;
          metrics->SetLeader(true);
          controller_thread = std::thread([&] { controller->Run(stop->notification()); });
        },
        [&] {
          metrics->SetLeader(false);
          result = absl::AbortedError("lost the leader Lease; exiting so that a fresh replica campaigns");
          stop->Notify();
        });
  }
  if (!flags.leader_elect) stop->notification()->WaitForNotification();
  if (controller_thread.joinable()) controller_thread.join();
  return result;
}

absl::Status Run(const Flags& flags) {
  services::BlockTerminationSignals();  // before any thread starts, so that only the watcher takes them
  ORCA_ASSIGN_OR_RETURN(const KubeClient::Options client_options, ClientOptionsFrom(flags));
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<KubeClient> client, KubeClient::Create(client_options));
  const std::string identity = CandidateIdentity();
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<OperatorMetrics> metrics, OperatorMetrics::Create());
  metrics->SetLeader(!flags.leader_elect);
  EventRecorder events(client.get(), "orca-operator", identity);
  Controller controller(client.get(), &events, metrics.get(), ControllerOptionsFrom(flags));

  std::atomic<bool> leading{!flags.leader_elect};
  OperatorAdminServer::Options admin_options;
  admin_options.listen_address = flags.http_listen;
  admin_options.metrics = [&metrics] { return metrics->Render(); };
  admin_options.readiness = [&]() -> absl::Status {
    if (!leading.load()) return absl::OkStatus();  // a healthy standby
    return controller.HasSynced() ? absl::OkStatus() : absl::UnavailableError("informers have not synced yet");
  };
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<OperatorAdminServer> admin, OperatorAdminServer::Start(admin_options));
  ORCA_LOG(INFO)
          .With("server", client_options.config.server)
          .With("namespace", flags.namespace_.empty() ? "*" : flags.namespace_)
      << "orca-operator started; admin HTTP on port " << admin->port();

  // Started after the last early return, so that no path leaves it unjoined; a signal that came earlier is pending.
  StopSignal stop;
  std::thread signal_thread = StartSignalWatcher(&stop);
  const absl::Status result =
      RunController(flags, LeaderElectionOptionsFrom(flags, client_options.config.namespace_, identity), client.get(),
                    &controller, metrics.get(), &leading, &stop);
  admin->Stop();
  stop.Notify();  // ends the signal watcher within one poll
  signal_thread.join();
  return result;
}

}  // namespace
}  // namespace orca::k8s

int main(int argc, char** argv) {
  orca::services::InstallCrashHandler(argv[0]);
  using orca::k8s::Flags;
  Flags f;
  orca::FlagSet flags("orca-operator", "Reconciles OrcaDeployment (serving.orca.dev/v1alpha1) objects.");
  flags.AddString("kubeconfig", &f.kubeconfig, "kubeconfig path; empty = in-cluster service account");
  flags.AddString("context", &f.context, "kubeconfig context; empty = current-context");
  flags.AddString("namespace", &f.namespace_, "watch one namespace (empty = all)");
  flags.AddBool("leader-elect", &f.leader_elect, "Lease-based leader election (run several replicas for HA)");
  flags.AddString("leader-election-namespace", &f.leader_election_namespace,
                  "namespace of the Lease; empty = $POD_NAMESPACE, else the kubeconfig's, else default");
  flags.AddString("leader-election-id", &f.leader_election_id, "name of the Lease");
  flags.AddString("http-listen", &f.http_listen, "/healthz, /readyz, /metrics");
  flags.AddString("cluster-domain", &f.cluster_domain, "cluster DNS suffix used in stage and scheduler addresses");
  flags.AddString("field-manager", &f.field_manager, "server-side apply field manager");
  flags.AddInt("resync-seconds", &f.resync_seconds, "re-reconcile every OrcaDeployment this often");
  flags.AddInt("watch-timeout-seconds", &f.watch_timeout_seconds, "server-side timeout of each watch request");
  flags.AddBool("manage-service-monitors", &f.manage_service_monitors,
                "create, list and delete monitoring.coreos.com ServiceMonitors (needs that RBAC); false never "
                "touches them");
  flags.AddString("gateway-scheduler-discovery", &f.scheduler_discovery,
                  "dns: the gateway resolves the schedulers' headless Service (scaling never restarts gateways); list: "
                  "the gateway gets one address per engine replica (scaling restarts gateways)");
  flags.AddString("render", &f.render,
                  "print the objects the OrcaDeployment(s) in this file (- = standard input) become, then exit");
  flags.AddBool("post-render", &f.post_render,
                "Helm post-renderer: read manifests on standard input, replace each OrcaDeployment by its objects, "
                "pass the rest through, then exit");
  flags.AddString("render-format", &f.render_format, "yaml or json (with --render / --post-render)");
  orca::services::AddLoggingFlags(&flags, &f.logging);
  if (auto exit_code = orca::services::ParseFlagsOrExit(flags, argc, argv, "ORCA_OPERATOR_")) {
    return *exit_code;
  }
  auto usage_error = [](const std::string& message) {
    std::cerr << "orca-operator: " << message << "\n";
    return 2;
  };
  if (absl::Status st = orca::services::ConfigureLogging("operator", f.logging); !st.ok()) {
    return usage_error(std::string(st.message()));
  }
  if (f.resync_seconds < 1 || f.watch_timeout_seconds < 1) {
    return usage_error("--resync-seconds and --watch-timeout-seconds must be >= 1");
  }
  if (f.render_format != "yaml" && f.render_format != "json")
    return usage_error("--render-format must be yaml or json");
  if (f.scheduler_discovery != "list" && f.scheduler_discovery != "dns") {
    return usage_error("--gateway-scheduler-discovery must be list or dns, got '" + f.scheduler_discovery + "'");
  }
  if (f.post_render && !f.render.empty()) return usage_error("--post-render reads standard input; drop --render");
  const bool offline = f.post_render || !f.render.empty();
  absl::Status st = offline ? orca::k8s::Render(f) : orca::k8s::Run(f);
  if (!st.ok()) {
    std::cerr << "orca-operator: " << st.message() << "\n";
    return 1;
  }
  return 0;
}
