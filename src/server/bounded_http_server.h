#pragma once
// cpp-httplib's server with the bounds a public endpoint needs and the library
// (0.11) lacks:
// - a cap on open connections: one thread serves one connection, and a
//   connection that finds every thread busy is answered 503 at once and closed,
//   instead of waiting unseen in an unbounded queue;
// - a deadline for the whole request line + headers and another for the body,
//   so a client that trickles bytes cannot hold a thread (the library only
//   times single reads out), and a byte budget for each, so one that floods
//   cannot fill memory;
// - an idle limit and a request count per kept-alive connection;
// - a way for a handler to close its connection after the response (a request
//   refused before its body was read must not have that body parsed as the
//   next request), and to see whether its client hung up while it waits.
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace fathom::server {

struct ConnectionLimits {
  int max_connections = 128;            // served at once; one more gets a 503
  int header_timeout_s = 10;            // request line + headers, from their first byte
  int body_timeout_s = 60;              // the body, after the headers
  int idle_timeout_s = 5;               // between requests on one connection (and before the first)
  int write_timeout_s = 30;             // one blocked write
  int max_requests_per_connection = 1000;
  size_t max_header_bytes = 64 << 10;   // request line + headers (the library caps single lines only)
  // Raw body bytes, chunked framing included: the library bounds a
  // Content-Length body but reads a chunked one without limit.
  size_t max_body_bytes = 16 << 20;
};

class ConnectionRefuser;

class BoundedHttpServer final : public httplib::Server {
 public:
  explicit BoundedHttpServer(const ConnectionLimits& limits);
  ~BoundedHttpServer() override;

  // After binding: the library listens with a backlog of 5, so a burst of
  // connections has its SYNs dropped and waits a second or more to connect.
  void widen_accept_backlog();

  int64_t open_connections() const { return open_.load(); }
  int64_t refused_connections() const { return refused_.load(); }

  // For the handler of the request being served on this thread:
  // close the connection once its response is written;
  static void close_connection_after_response();
  // whether its client has closed the connection (or reset it).
  static bool client_disconnected();

 private:
  bool process_and_close_socket(int sock) override;

  const ConnectionLimits limits_;
  std::atomic<int64_t> open_{0}, refused_{0};
  std::unique_ptr<ConnectionRefuser> refuser_;
};

}  // namespace fathom::server
