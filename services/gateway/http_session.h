#pragma once
/// One HTTP connection (internal to HttpServer). All of its state lives on the
/// connection's strand; HttpExchange calls from other threads are posted there.
///
/// Per request:
///
///   kReading ──request read──▶ kHandling ──Respond──────▶ kWriting ──written──▶ kReading
///                                  │      ──StartStream──▶ kStreaming ──EndStream written──┘
///                                  └── peer gone (read watch / write error) ──▶ kClosed
///   (kIdle: done, waiting for the cancelled watch read; kDraining: closing after
///   a final response, e.g. a 413, while discarding unread input)
///
/// While a request is handled, a read stays posted on the socket so that a
/// client that closes the connection is noticed at once (pipelined bytes that
/// arrive meanwhile are kept for the next request).
///
/// Streamed output draws on the server's OutputBudget (when it has one): each
/// Write is charged when it is made and refunded when the socket has taken it;
/// ReadyForMore pauses the producer while the stream holds more than its share,
/// and a pause longer than the budget's max_pause ends the request.

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "services/gateway/http_server.h"
#include "services/gateway/output_budget.h"

namespace orca::gateway {

struct HttpSessionConfig {
  size_t max_body_bytes = 0;
  size_t max_header_bytes = 0;
  absl::Duration idle_timeout;
  size_t max_buffered_write_bytes = 0;
  /// Shared by every session of the server; null: no overall budget.
  std::shared_ptr<OutputBudget> output_budget;
  HttpServer::Handler handler;
  HttpServer::ErrorResponder error_responder;
  /// Exchanges handed to the handler and not yet fully written or abandoned.
  std::shared_ptr<std::atomic<int64_t>> active_exchanges = std::make_shared<std::atomic<int64_t>>(0);
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<const HttpSessionConfig> config);
  ~HttpSession();

  /// Starts reading requests.
  void Start();
  /// Closes the connection (an in-flight exchange sees a disconnect). Any thread.
  void Close();

  // HttpExchange operations for exchange `seq`; any thread (posted to the strand).
  void Respond(uint64_t seq, HttpResponse response);
  void StartStream(uint64_t seq, int status, std::string content_type, HttpHeaders headers);
  void Write(uint64_t seq, std::string data);
  void EndStream(uint64_t seq);
  void SetDisconnectHandler(uint64_t seq, std::function<void()> handler);
  bool ReadyForMore(uint64_t seq, std::function<void(const absl::Status&)> on_ready);

 private:
  enum class State { kReading, kHandling, kWriting, kStreaming, kIdle, kDraining, kClosed };

  template <typename F>
  void Post(F&& f);
  bool ExchangeActive() const {
    return state_ == State::kHandling || state_ == State::kWriting || state_ == State::kStreaming;
  }
  bool IsCurrent(uint64_t seq) const { return seq == seq_ && ExchangeActive(); }

  void DoReadHeader();
  /// Feeds the buffered bytes to the parser (after the obs-fold scan, which
  /// needs the raw head) and reads more until the head is complete.
  void ParseHeader();
  void OnHeaderBytes(boost::beast::error_code ec, size_t bytes);
  void OnHeader(boost::beast::error_code ec);
  void DoReadBody();
  void OnBody(boost::beast::error_code ec);
  void Dispatch();
  void StartWatch();
  void OnWatch(boost::beast::error_code ec, size_t bytes);

  void SendServerError(int status, std::string message);
  std::string SerializeHead(int status, const std::string& content_type, const HttpHeaders& headers,
                            std::optional<size_t> content_length) const;
  void QueueWrite(std::string data, bool last);
  void Flush();
  void OnWrite(boost::beast::error_code ec);
  void OnExchangeComplete();
  // Output flow control (strand): the socket took `bytes` charged bytes.
  void OutputTaken(size_t bytes);
  // Refunds every charge, leaves the budget's stream count, resumes paused producers.
  void ReleaseOutput();
  void ArmPauseTimer();
  void OnPauseTimer(boost::beast::error_code ec);
  // After a pause ended the request: closes the connection unless the client takes output in time.
  void ArmSlowReaderTimer();
  void PeerGone();
  /// Half-closes after a final response and drains the client's input.
  void GracefulClose();
  void Drain();
  void Shutdown();

  boost::beast::tcp_stream stream_;
  const std::shared_ptr<const HttpSessionConfig> config_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::string peer_;
  size_t head_scanned_ = 0;    // FindObsFold's position in buffer_
  HttpHeaders header_fields_;  // of the request being read, as checked (names lower-cased)

  State state_ = State::kReading;
  uint64_t seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool chunked_ = false;
  std::function<void()> on_disconnect_;
  bool watching_ = false;

  std::string write_inflight_;
  std::string write_pending_;
  bool writing_ = false;
  bool end_pending_ = false;
  bool counted_ = false;  // this exchange is in config_->active_exchanges

  // Output flow control. Strand-only:
  size_t pending_charge_ = 0;    // budget charges of write_pending_
  size_t inflight_charge_ = 0;   // ... of write_inflight_
  bool stream_counted_ = false;  // in the budget's stream count
  boost::asio::steady_timer pause_timer_;
  bool pause_timer_armed_ = false;
  boost::asio::steady_timer slow_reader_timer_;
  bool slow_reader_ = false;  // its request was ended for not reading
  // Shared with ReadyForMore callers (producers' threads):
  absl::Mutex flow_mu_;
  uint64_t flow_seq_ ABSL_GUARDED_BY(flow_mu_) = 0;     // the streaming exchange; 0: none
  size_t flow_buffered_ ABSL_GUARDED_BY(flow_mu_) = 0;  // its charged bytes not yet taken
  std::vector<std::function<void(const absl::Status&)>> waiters_ ABSL_GUARDED_BY(flow_mu_);
};

}  // namespace orca::gateway
