#include "core/engine/gloo_communicator.h"

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace orca {
namespace {

// Gloo reports failures by exception; they stop here.
absl::Status FromException(const std::exception& e, const std::string& what) {
  const std::string msg = e.what();
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    if (msg.find("Timed out") != std::string::npos || msg.find("timed out") != std::string::npos)
      return absl::DeadlineExceededError(absl::StrCat(what, ": peer did not respond in time: ", msg));
    return absl::UnavailableError(absl::StrCat(what, ": connection to peer failed: ", msg));
  }
  return absl::InternalError(absl::StrCat(what, ": ", msg));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(const Options& o) {
  if (o.store == nullptr) return absl::InvalidArgumentError("GlooCommunicator needs a rendezvous store");
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return absl::InvalidArgumentError(absl::StrCat("invalid rank ", o.rank, " for group size ", o.size));
  std::unique_ptr<GlooCommunicator> c(new GlooCommunicator());
  c->rank_ = o.rank;
  c->size_ = o.size;
  c->timeout_ = o.op_timeout.count() > 0 ? o.op_timeout : o.timeout;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.hostname;
    c->device_ = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(o.timeout);
    gloo::rendezvous::PrefixStore store(o.prefix, *o.store);
    ctx->connectFullMesh(store, c->device_);
    ctx->setTimeout(c->timeout_);
    c->context_ = ctx;
  } catch (const std::exception& e) {
    return FromException(e,
                         absl::StrCat("connecting data-plane group '", o.prefix, "' as rank ", o.rank, " of ", o.size));
  }
  return c;
}

GlooCommunicator::~GlooCommunicator() = default;

absl::Status GlooCommunicator::AllReduceSum(float* data, size_t count) {
  if (size_ == 1 || count == 0) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return FromException(e, "all-reduce");
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Send(int32_t peer, const void* data, size_t bytes) {
  return PointToPoint(peer, const_cast<void*>(data), bytes, /*send=*/true);
}

absl::Status GlooCommunicator::Recv(int32_t peer, void* data, size_t bytes) {
  return PointToPoint(peer, data, bytes, /*send=*/false);
}

absl::Status GlooCommunicator::PointToPoint(int32_t peer, void* data, size_t bytes, bool send) {
  const std::string what = absl::StrCat(send ? "send to" : "receive from", " rank ", peer);
  try {
    std::unique_ptr<gloo::transport::UnboundBuffer> buf = context_->createUnboundBuffer(data, bytes);
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (aborted_) return absl::AbortedError(absl::StrCat(what, ": the data-plane group was abandoned"));
      waiting_ = buf.get();
    }
    bool completed;
    if (send) {
      buf->send(peer, /*slot=*/0);
      completed = buf->waitSend(timeout_);
    } else {
      buf->recv(peer, /*slot=*/0);
      completed = buf->waitRecv(timeout_);
    }
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      waiting_ = nullptr;
    }
    if (!completed) return absl::AbortedError(absl::StrCat(what, ": the data-plane group was abandoned"));
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    waiting_ = nullptr;
    return FromException(e, what);
  }
  return absl::OkStatus();
}

void GlooCommunicator::Abort() {
  std::lock_guard<std::mutex> lock(abort_mu_);
  aborted_ = true;
  if (waiting_ != nullptr) {
    // Whichever wait it is in; the other abort flag is never read.
    waiting_->abortWaitSend();
    waiting_->abortWaitRecv();
  }
}

std::unique_ptr<gloo::rendezvous::Store> GlooCommunicator::MakeLocalStore() {
  return std::make_unique<gloo::rendezvous::HashStore>();
}

}  // namespace orca
