#pragma once
/// Request framing checks of RFC 9112 that Boost.Beast's parser leaves to its
/// user (internal to HttpSession). Beast rejects a Transfer-Encoding with a
/// Content-Length and conflicting Content-Length values; these add what a
/// request smuggler relies on Beast to accept:
///
///   Transfer-Encoding whose final coding is not chunked    400 (§6.3: the length is unknown)
///   chunked applied more than once                          400 (§6.1)
///   any coding besides chunked (gzip, chunked)              501 (§6.1: none is implemented)
///   Transfer-Encoding in an HTTP/1.0 request                400 (§6.1: faulty framing)
///   Content-Length twice, or as a list ("5, 5")             400 (§6.3)
///   no Host in HTTP/1.1, or more than one Host              400 (§3.2)
///   obs-fold: a header line starting with SP or HTAB        400 (§5.2)
///   more than one Authorization                             400 (which one counts is ambiguous)
///
/// Each of these ends the connection: after it nothing the client sent may be
/// read as a request.

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace orca::gateway {

/// Why a request is refused: its HTTP status (400 or 501) and a message naming the header.
struct FramingError {
  int status = 400;
  std::string message;
};

/// Scans the raw request head in `data` (the bytes buffered so far, from the
/// request line on) for obs-fold, from `*scanned` on (start at 0); advances
/// `*scanned` past what was checked, so that a head arriving in pieces is
/// scanned once, and to npos once the head's end was seen (the body is not
/// scanned).
/// Returns the error for the first folded line.
std::optional<FramingError> FindObsFold(std::string_view data, size_t* scanned);

/// Checks a parsed request header (see the table above); nullopt when it is sound.
std::optional<FramingError> CheckRequestHeader(const boost::beast::http::request_header<>& header);

}  // namespace orca::gateway
