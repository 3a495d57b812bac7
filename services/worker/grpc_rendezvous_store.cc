#include "services/worker/grpc_rendezvous_store.h"

#include <gloo/common/error.h>
#include <grpcpp/grpcpp.h>

#include <thread>

namespace orca::worker {

GrpcRendezvousStore::GrpcRendezvousStore(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout)
    : stub_(v1::Scheduler::NewStub(std::move(channel))), timeout_(timeout) {}

void GrpcRendezvousStore::ThrowIfCancelled(const std::string& key) const {
  if (cancelled_ && cancelled_())
    throw gloo::IoException("rendezvous on '" + key +
                            "' abandoned: a newer session started (or the worker is stopping)");
}

void GrpcRendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StoreSetRequest req;
    req.set_key(key);
    req.set_value(std::string(data.begin(), data.end()));
    v1::StoreSetResponse resp;
    grpc::Status s = stub_->StoreSet(&ctx, req, &resp);
    if (s.ok()) return;
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED)
      throw gloo::IoException("rendezvous store refused this worker: " + s.error_message() +
                              " (give both the same --internal-token-file)");
    ThrowIfCancelled(key);
    if (std::chrono::steady_clock::now() > deadline)
      throw gloo::IoException("rendezvous store set '" + key + "' failed: " + s.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

bool GrpcRendezvousStore::Fetch(const std::string& key, std::chrono::milliseconds wait, std::vector<char>* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + wait + std::chrono::seconds(5));
  v1::StoreGetRequest req;
  req.set_key(key);
  req.set_wait_millis(wait.count());
  v1::StoreGetResponse resp;
  grpc::Status s = stub_->StoreGet(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED)
    throw gloo::IoException("rendezvous store refused this worker: " + s.error_message() +
                            " (give both the same --internal-token-file)");
  if (!s.ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // scheduler restarting: retry
    return false;
  }
  if (!resp.found()) return false;
  if (out) out->assign(resp.value().begin(), resp.value().end());
  return true;
}

std::vector<char> GrpcRendezvousStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> out;
  if (!Fetch(key, std::chrono::milliseconds(0), &out)) throw gloo::IoException("rendezvous key '" + key + "' vanished");
  return out;
}

void GrpcRendezvousStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GrpcRendezvousStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      ThrowIfCancelled(key);
      if (left.count() <= 0) throw gloo::IoException("Timed out waiting for rendezvous key '" + key + "'");
      if (Fetch(key, std::min(left, std::chrono::milliseconds(250)), nullptr)) break;
    }
  }
}

}  // namespace orca::worker
