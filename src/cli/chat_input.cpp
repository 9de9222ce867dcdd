#include "cli/chat_input.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace fathom::cli {

namespace {

std::atomic<bool> g_interrupted{false};
int g_wake[2] = {-1, -1};  // [read, write] ends of the self-pipe

void on_sigint(int) {
  g_interrupted.store(true);
  const char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(g_wake[1], &byte, 1);  // non-blocking: a full pipe already wakes
}

}  // namespace

void Interrupts::install() {
  static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");
  check(::pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) == 0, "chat: cannot create a pipe: ", std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  // Writes to the terminal resume after a Ctrl-C; the reader waits in poll(),
  // which the pipe wakes whatever this flag says.
  action.sa_flags = SA_RESTART;
  check(::sigaction(SIGINT, &action, nullptr) == 0, "chat: cannot handle Ctrl-C: ", std::strerror(errno));
}

bool Interrupts::pending() { return g_interrupted.load(); }

void Interrupts::clear() {
  g_interrupted.store(false);
  char sink[64];
  while (::read(g_wake[0], sink, sizeof sink) > 0) {
  }
}

int Interrupts::wake_fd() { return g_wake[0]; }

ChatInput::ChatInput(int fd, bool interactive) : fd_(fd), interactive_(interactive) {}

ChatInput::LineStatus ChatInput::read_line(const char* prompt, std::string& line) {
  if (interactive_) {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
  }
  for (;;) {
    const size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return LineStatus::line;
    }
    if (at_end_) {
      if (buffer_.empty()) return LineStatus::end;
      line = std::move(buffer_);  // a last line without a newline
      buffer_.clear();
      return LineStatus::line;
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {Interrupts::wake_fd(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno != EINTR) fail("chat: cannot wait for input: ", std::strerror(errno));
    if (Interrupts::pending()) {
      Interrupts::clear();
      buffer_.clear();  // the terminal drops the typed line on Ctrl-C too
      return LineStatus::interrupted;
    }
    if (ready <= 0 || !(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[4096];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) fail("chat: cannot read input: ", std::strerror(errno));
    if (n == 0) at_end_ = true;
    buffer_.append(chunk, size_t(n));
  }
}

ChatInput::Turn ChatInput::next() {
  std::string line;
  LineStatus status = read_line(">>> ", line);
  if (status == LineStatus::interrupted) return {Status::interrupted, {}};
  if (status == LineStatus::end) return {Status::end, {}};

  static const std::string kFence = "\"\"\"";
  auto ends_with_fence = [](const std::string& s) {
    return s.size() >= kFence.size() && s.compare(s.size() - kFence.size(), kFence.size(), kFence) == 0;
  };
  if (line.rfind(kFence, 0) == 0) {
    // """ opens a block that ends at a line ending in """.
    std::vector<std::string> lines;
    line.erase(0, kFence.size());
    for (;;) {
      const bool closes = ends_with_fence(line);
      if (closes) line.erase(line.size() - kFence.size());
      lines.push_back(line);
      if (closes) break;
      status = read_line("... ", line);
      if (status == LineStatus::interrupted) return {Status::interrupted, {}};
      if (status == LineStatus::end) break;
    }
    // Fences on lines of their own add no empty first or last line.
    if (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
    return {Status::message, text};
  }
  std::string text;
  // A trailing backslash continues the message on the next line.
  while (!line.empty() && line.back() == '\\') {
    line.pop_back();
    text += line + "\n";
    status = read_line("... ", line);
    if (status == LineStatus::interrupted) return {Status::interrupted, {}};
    if (status == LineStatus::end) {
      line.clear();
      break;
    }
  }
  return {Status::message, text + line};
}

}  // namespace fathom::cli
