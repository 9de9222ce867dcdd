#include "server/bounded_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fathom::server {

namespace {

using Clock = std::chrono::steady_clock;

int millis_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : int(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline; EINTR does not shorten the wait.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, millis_until(deadline));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

// True while the peer has neither closed nor reset the connection.
bool peer_alive(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// One connection's byte stream. Reads are bounded by the current request's
// deadline (headers first, then the body); bytes read ahead stay buffered for
// the next request on the connection.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}

  // Waits for the first byte of the next request; false on idle timeout, close or stop.
  template <typename Stopping>
  bool wait_for_request(const Stopping& stopping) {
    if (off_ < len_) return true;
    const auto idle_end = Clock::now() + std::chrono::seconds(limits_.idle_timeout_s);
    while (!stopping()) {
      // Short slices, so a stopping server does not wait out an idle client.
      const auto slice = std::min(idle_end, Clock::now() + std::chrono::milliseconds(200));
      if (wait_for(fd_, POLLIN, slice)) return true;
      if (Clock::now() >= idle_end) return false;
    }
    return false;
  }
  void start_request() {
    deadline_ = Clock::now() + std::chrono::seconds(limits_.header_timeout_s);
    budget_ = limits_.max_header_bytes;
  }
  void headers_read() {
    deadline_ = Clock::now() + std::chrono::seconds(limits_.body_timeout_s);
    budget_ = limits_.max_body_bytes;
  }
  // A body announced too large (or malformed) is not waited for: the library's
  // 413 then comes at once instead of after skipping what never arrives.
  void refuse_body() { budget_ = 0; }

  bool is_readable() const override { return off_ < len_ || wait_for(fd_, POLLIN, deadline_); }
  bool is_writable() const override {
    return wait_for(fd_, POLLOUT, Clock::now() + std::chrono::seconds(limits_.write_timeout_s)) && peer_alive(fd_);
  }

  // Bytes handed to the library count against the phase's budget; past it the
  // read fails and the request ends in an error that closes the connection.
  ssize_t read(char* ptr, size_t size) override {
    if (budget_ == 0) {
      cut_off_ = true;
      return -1;
    }
    size = std::min(size, budget_);
    const ssize_t n = read_buffered(ptr, size);
    if (n > 0) budget_ -= size_t(n);
    if (n < 0) cut_off_ = true;
    return n;
  }
  // A read ran out of time or budget: whatever the library answered, the
  // connection's byte stream is no longer at a request boundary.
  bool cut_off() const { return cut_off_; }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(fd_, POLLOUT, Clock::now() + std::chrono::seconds(limits_.write_timeout_s))) return -1;
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  int socket() const override { return fd_; }

  bool client_alive() const { return off_ < len_ || peer_alive(fd_); }

 private:
  ssize_t read_buffered(char* ptr, size_t size) {
    if (off_ < len_) {
      const size_t n = std::min(size, len_ - off_);
      std::memcpy(ptr, buffer_.data() + off_, n);
      off_ += n;
      return ssize_t(n);
    }
    if (!wait_for(fd_, POLLIN, deadline_)) return -1;
    if (size >= buffer_.size()) return recv_some(ptr, size);
    const ssize_t n = recv_some(buffer_.data(), buffer_.size());
    if (n <= 0) return n;
    off_ = 0;
    len_ = size_t(n);
    return read_buffered(ptr, size);
  }

  ssize_t recv_some(char* ptr, size_t size) {
    for (;;) {
      const ssize_t n = ::recv(fd_, ptr, size, MSG_DONTWAIT);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  const int fd_;
  const ConnectionLimits& limits_;
  Clock::time_point deadline_ = Clock::now();
  size_t budget_ = 0;  // bytes the current phase (headers, body) may still read
  bool cut_off_ = false;
  std::array<char, 16384> buffer_{};
  size_t off_ = 0, len_ = 0;
};

thread_local ConnectionStream* t_stream = nullptr;
thread_local bool t_close_after_response = false;
thread_local bool t_refusing = false;

// One thread per connection, and no waiting line: a connection that finds
// every thread busy is run at once on the accepting thread in refusing mode.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mutex_);
      if (busy_ + jobs_.size() < threads_.size()) {
        jobs_.push_back(std::move(fn));
        ready_.notify_one();
        return;
      }
    }
    t_refusing = true;
    fn();
    t_refusing = false;
  }
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        ++busy_;
      }
      fn();
      std::lock_guard lock(mutex_);
      --busy_;
    }
  }

  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  size_t busy_ = 0;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable ready_;
};

}  // namespace

// Answers refused connections with a 503 and closes them gracefully: the
// answer goes out at once, then what the client still sends is read and
// dropped for up to a second (closing with unread input would reset the
// connection and could destroy the 503 before the client reads it).
class ConnectionRefuser {
 public:
  ConnectionRefuser() : thread_([this] { loop(); }) {}
  ~ConnectionRefuser() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    thread_.join();
    for (const auto& c : draining_) ::close(c.fd);
    for (int fd : incoming_) ::close(fd);
  }

  void refuse(int fd) {
    static const std::string body =
        R"({"error":{"message":"the server is at its connection limit; retry later","type":"server_error",)"
        R"("param":null,"code":"too_many_connections"}})";
    static const std::string response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                        "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                                        std::to_string(body.size()) + "\r\n\r\n" + body;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    [[maybe_unused]] ssize_t sent = ::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    std::lock_guard lock(mutex_);
    if (incoming_.size() + draining_.size() >= kMaxDraining) {
      ::close(fd);
      return;
    }
    incoming_.push_back(fd);
    ready_.notify_one();
  }

 private:
  static constexpr size_t kMaxDraining = 1024;
  struct Draining {
    int fd;
    Clock::time_point until;
  };

  void loop() {
    std::vector<pollfd> polled;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, std::chrono::milliseconds(draining_.empty() ? 1000 : 20),
                        [&] { return stopping_ || !incoming_.empty(); });
        if (stopping_) return;
        for (int fd : incoming_) draining_.push_back({fd, Clock::now() + std::chrono::seconds(1)});
        incoming_.clear();
      }
      polled.clear();
      for (const auto& c : draining_) polled.push_back({c.fd, POLLIN, 0});
      if (!polled.empty()) ::poll(polled.data(), polled.size(), 0);
      const auto now = Clock::now();
      std::vector<Draining> kept;
      for (size_t i = 0; i < draining_.size(); ++i) {
        bool done = now >= draining_[i].until;
        if (!done && (polled[i].revents & (POLLIN | POLLHUP | POLLERR))) {
          char sink[4096];
          const ssize_t n = ::recv(draining_[i].fd, sink, sizeof(sink), MSG_DONTWAIT);
          done = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        }
        if (done) ::close(draining_[i].fd);
        else kept.push_back(draining_[i]);
      }
      draining_ = std::move(kept);
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int> incoming_;
  std::vector<Draining> draining_;  // touched by the loop thread only
  bool stopping_ = false;
  std::thread thread_;
};

BoundedHttpServer::BoundedHttpServer(const ConnectionLimits& limits)
    : limits_(limits), refuser_(std::make_unique<ConnectionRefuser>()) {
  const size_t threads = size_t(limits.max_connections);
  new_task_queue = [threads] { return new ConnectionPool(threads); };
  // The library applies these to single reads and writes; the stream adds the deadlines.
  set_read_timeout(limits.header_timeout_s, 0);
  set_write_timeout(limits.write_timeout_s, 0);
  set_keep_alive_timeout(limits.idle_timeout_s);
  set_keep_alive_max_count(size_t(limits.max_requests_per_connection));
  // The library's default adds SO_REUSEPORT, which lets another process of
  // this user bind the same port and take a share of the connections.
  set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

BoundedHttpServer::~BoundedHttpServer() = default;

void BoundedHttpServer::widen_accept_backlog() { ::listen(svr_sock_, SOMAXCONN); }

void BoundedHttpServer::close_connection_after_response() { t_close_after_response = true; }

bool BoundedHttpServer::client_disconnected() { return t_stream != nullptr && !t_stream->client_alive(); }

bool BoundedHttpServer::process_and_close_socket(int sock) {
  if (t_refusing) {
    ++refused_;
    refuser_->refuse(sock);
    return false;
  }
  ++open_;
  // stop() closes the listening socket first; requests already being served still complete.
  const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  ConnectionStream stream(sock, limits_);
  t_stream = &stream;
  bool ok = true;
  for (int served = 0; served < limits_.max_requests_per_connection; ++served) {
    if (stopping() || !stream.wait_for_request(stopping)) break;
    stream.start_request();
    t_close_after_response = false;
    bool closed = false;
    const bool last = served + 1 == limits_.max_requests_per_connection;
    size_t body_bytes = 0;
    ok = process_request(stream, last, closed, [&](httplib::Request& req) {
      stream.headers_read();
      if (!req.has_header("Content-Length")) return;
      const std::string length = req.get_header_value("Content-Length");
      const bool digits = !length.empty() && length.size() <= 18 &&
                          length.find_first_not_of("0123456789") == std::string::npos;
      body_bytes = digits ? size_t(std::stoull(length)) : SIZE_MAX;
      if (body_bytes > limits_.max_body_bytes) stream.refuse_body();
    });
    // A large body (and what was built from it) leaves free memory in this
    // thread's arena that glibc would otherwise keep: give it back.
    if (body_bytes >= (size_t(1) << 20) && body_bytes != SIZE_MAX) malloc_trim(0);
    if (!ok || closed || t_close_after_response || stream.cut_off()) break;
  }
  t_stream = nullptr;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  --open_;
  return ok;
}

}  // namespace fathom::server
