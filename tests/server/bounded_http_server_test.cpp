// The connection layer on real sockets and threads (also the ThreadSanitizer
// run's main workload): the cap, the deadlines and budgets, closing after a
// response, and noticing a client that left.
#include "server/bounded_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fathom::server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A server on a free loopback port, serving until destroyed.
class RunningServer {
 public:
  explicit RunningServer(const ConnectionLimits& limits) : http(limits) {
    http.Get("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_param_value("x"), "text/plain");
    });
    http.Get("/close", [](const httplib::Request&, httplib::Response& res) {
      BoundedHttpServer::close_connection_after_response();
      res.set_content("bye", "text/plain");
    });
    http.Get("/wait-for-hangup", [this](const httplib::Request&, httplib::Response& res) {
      const auto end = Clock::now() + 10s;
      while (Clock::now() < end && !BoundedHttpServer::client_disconnected()) std::this_thread::sleep_for(20ms);
      noticed_hangup = Clock::now() < end;
      res.set_content("late", "text/plain");
    });
    port = http.bind_to_any_port("127.0.0.1");
    http.widen_accept_backlog();
    thread = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~RunningServer() {
    http.stop();
    thread.join();
  }

  BoundedHttpServer http;
  int port = 0;
  std::atomic<bool> noticed_hangup{false};
  std::thread thread;
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void send_all(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

// Reads until the server closes the connection or `limit` passes; returns what came and whether it closed.
std::pair<std::string, bool> read_until_closed(int fd, std::chrono::milliseconds limit) {
  timeval tv{0, 50000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  const auto end = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < end) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return {out, true};
    if (n > 0) out.append(buf, size_t(n));
    else if (errno != EAGAIN && errno != EWOULDBLOCK) return {out, true};
  }
  return {out, false};
}

ConnectionLimits short_limits() {
  ConnectionLimits l;
  l.max_connections = 4;
  l.header_timeout_s = 1;
  l.body_timeout_s = 1;
  l.idle_timeout_s = 1;
  l.max_header_bytes = 8 << 10;
  return l;
}

TEST(BoundedHttpServer, ManyClientsOnManyThreadsAllGetTheirAnswers) {
  ConnectionLimits limits;
  limits.max_connections = 16;
  RunningServer server(limits);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  const uint64_t seed = std::random_device{}();
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&, c] {
      std::mt19937_64 rng(seed + uint64_t(c));
      httplib::Client client("127.0.0.1", server.port);
      for (int i = 0; i < 25; ++i) {
        const std::string x = std::to_string(rng());
        auto res = client.Get(("/echo?x=" + x).c_str());
        if (res && res->status == 200 && res->body == x) ++ok;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(BoundedHttpServer, BeyondTheCapAConnectionGetsAnImmediate503) {
  RunningServer server(short_limits());
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(connect_to(server.port));
  std::this_thread::sleep_for(100ms);  // the four take every thread
  const int extra = connect_to(server.port);
  const auto t0 = Clock::now();
  send_all(extra, "GET /echo?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto [reply, closed] = read_until_closed(extra, 3000ms);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 503", 0), 0u) << reply;
  EXPECT_NE(reply.find("too_many_connections"), std::string::npos);
  EXPECT_LT(Clock::now() - t0, 500ms);
  EXPECT_GE(server.http.refused_connections(), 1);
  for (int fd : held) ::close(fd);
  ::close(extra);
}

TEST(BoundedHttpServer, IdleAndTricklingConnectionsAreClosedOnTime) {
  RunningServer server(short_limits());
  const int idle = connect_to(server.port);
  const int trickle = connect_to(server.port);
  send_all(trickle, "GET /echo?x=1 HTTP/1.1\r\n");
  std::thread drip([&] {
    for (int i = 0; i < 30; ++i) {
      if (::send(trickle, "X-Drip: 1\r\n", 11, MSG_NOSIGNAL) < 0) return;
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto t0 = Clock::now();
  EXPECT_TRUE(read_until_closed(idle, 3000ms).second);
  const auto [reply, closed] = read_until_closed(trickle, 3000ms);
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - t0, 2500ms);  // header deadline 1 s, not 30 drips
  drip.join();
  ::close(idle);
  ::close(trickle);
  httplib::Client client("127.0.0.1", server.port);
  auto res = client.Get("/echo?x=still");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "still");
}

TEST(BoundedHttpServer, HeadersBeyondTheirBudgetEndTheConnection) {
  RunningServer server(short_limits());
  const int fd = connect_to(server.port);
  std::string head = "GET /echo?x=1 HTTP/1.1\r\n";
  while (head.size() < (32u << 10)) head += "X-Filler: " + std::string(500, 'a') + "\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  const auto [reply, closed] = read_until_closed(fd, 3000ms);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.find("HTTP/1.1 200"), std::string::npos);
  ::close(fd);
}

TEST(BoundedHttpServer, AHandlerCanCloseItsConnectionAfterTheResponse) {
  RunningServer server(short_limits());
  const int fd = connect_to(server.port);
  // Two pipelined requests: the first closes the connection, so the second is never answered.
  send_all(fd, "GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?x=2 HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto [reply, closed] = read_until_closed(fd, 3000ms);
  EXPECT_TRUE(closed);
  EXPECT_NE(reply.find("bye"), std::string::npos);
  EXPECT_EQ(reply.find("HTTP/1.1", 5), std::string::npos) << reply;
  ::close(fd);
}

TEST(BoundedHttpServer, AHandlerNoticesItsClientHangingUp) {
  RunningServer server(short_limits());
  const int fd = connect_to(server.port);
  send_all(fd, "GET /wait-for-hangup HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  ::close(fd);
  const auto end = Clock::now() + 3s;
  while (!server.noticed_hangup && Clock::now() < end) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(server.noticed_hangup.load());
}

}  // namespace
}  // namespace fathom::server
