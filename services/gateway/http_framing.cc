#include "services/gateway/http_framing.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace orca::gateway {
namespace {

namespace http = boost::beast::http;

// Header values quoted in error messages (they are the client's own bytes).
std::string Quote(std::string_view value) {
  constexpr size_t kMaxQuoted = 64;
  std::string out(value.substr(0, kMaxQuoted));
  if (value.size() > kMaxQuoted) out += "...";
  return "'" + out + "'";
}

FramingError BadRequest(std::string message) { return FramingError{400, std::move(message)}; }

// The codings of every Transfer-Encoding field, in order, lower-cased; empty
// list elements are skipped (RFC 9110 §5.6.1).
std::vector<std::string> TransferCodings(const std::vector<std::string_view>& values) {
  std::vector<std::string> codings;
  for (std::string_view value : values) {
    for (absl::string_view element : absl::StrSplit(absl::string_view(value.data(), value.size()), ',')) {
      std::string coding = absl::AsciiStrToLower(absl::StripAsciiWhitespace(element));
      if (!coding.empty()) codings.push_back(std::move(coding));
    }
  }
  return codings;
}

std::optional<FramingError> CheckTransferEncoding(const http::request_header<>& header,
                                                  const std::vector<std::string_view>& values) {
  std::string joined;
  for (std::string_view value : values) {
    if (!joined.empty()) joined += ", ";
    joined.append(value.data(), value.size());
  }
  if (header.version() < 11) {
    return BadRequest("Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1)");
  }
  const std::vector<std::string> codings = TransferCodings(values);
  if (codings.empty() || codings.back() != "chunked") {
    return BadRequest(absl::StrCat("Transfer-Encoding ", Quote(joined),
                                   ": chunked is not the final transfer coding, so the body length is unknown "
                                   "(RFC 9112 section 6.3)"));
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (codings[i] == "chunked") {
      return BadRequest(absl::StrCat("Transfer-Encoding ", Quote(joined), " applies chunked more than once"));
    }
  }
  if (codings.size() > 1) {
    return FramingError{501,
                        absl::StrCat("transfer coding ", Quote(codings.front()),
                                     " is not implemented; only chunked is (Transfer-Encoding ", Quote(joined), ")")};
  }
  return std::nullopt;
}

}  // namespace

std::optional<FramingError> FindObsFold(std::string_view data, size_t* scanned) {
  // A line break inside the head followed by SP or HTAB starts a folded line.
  // The head ends at the first empty line; what follows it is the body.
  if (*scanned == std::string_view::npos) return std::nullopt;
  size_t pos = *scanned;
  for (;;) {
    const size_t crlf = data.find("\r\n", pos);
    if (crlf == std::string_view::npos) {
      // A '\r' at the end may begin the next line break: look at it again.
      *scanned = data.empty() ? pos : std::max(pos, data.size() - 1);
      return std::nullopt;
    }
    if (crlf + 2 >= data.size()) {  // the byte after the line break decides
      *scanned = crlf;
      return std::nullopt;
    }
    const char next = data[crlf + 2];
    if (next == '\r') {  // the empty line: the head is complete
      *scanned = std::string_view::npos;
      return std::nullopt;
    }
    if (next == ' ' || next == '\t') {
      return BadRequest(
          "A header line starts with a space or tab: obsolete line folding is not accepted (RFC 9112 section 5.2)");
    }
    pos = crlf + 2;
  }
}

std::optional<FramingError> CheckRequestHeader(const http::request_header<>& header) {
  int num_hosts = 0;
  int num_authorizations = 0;
  std::vector<std::string_view> content_lengths;
  std::vector<std::string_view> transfer_encodings;
  for (const auto& field : header) {
    switch (field.name()) {
      case http::field::host:
        ++num_hosts;
        break;
      case http::field::authorization:
        ++num_authorizations;
        break;
      case http::field::content_length:
        content_lengths.push_back(field.value());
        break;
      case http::field::transfer_encoding:
        transfer_encodings.push_back(field.value());
        break;
      default:
        break;
    }
  }
  if (!transfer_encodings.empty()) {
    if (!content_lengths.empty()) {
      return BadRequest("A request may not carry both Transfer-Encoding and Content-Length (RFC 9112 section 6.1)");
    }
    if (auto error = CheckTransferEncoding(header, transfer_encodings)) return error;
  }
  if (content_lengths.size() > 1) return BadRequest("The request has more than one Content-Length header");
  if (!content_lengths.empty() && content_lengths.front().find(',') != std::string_view::npos) {
    return BadRequest(absl::StrCat("Content-Length ", Quote(content_lengths.front()),
                                   " holds more than one value; send one decimal number"));
  }
  if (num_hosts > 1) return BadRequest("The request has more than one Host header (RFC 9112 section 3.2)");
  if (num_hosts == 0 && header.version() >= 11) {
    return BadRequest("The HTTP/1.1 request has no Host header (RFC 9112 section 3.2)");
  }
  if (num_authorizations > 1) {
    return BadRequest("The request has more than one Authorization header; send one credential");
  }
  return std::nullopt;
}

}  // namespace orca::gateway
