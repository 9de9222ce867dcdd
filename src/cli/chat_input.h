#pragma once
// The terminal side of `fathom chat`: Ctrl-C as a request to stop (not a
// signal that ends the program), and the user's turns read from stdin, one
// message across several lines when a line ends with a backslash or the
// message is wrapped in """ … """.
#include <string>

namespace fathom::cli {

// Ctrl-C (SIGINT) sets a flag that the answer being written checks at every
// token, and wakes a reader waiting for input (the handler writes to a pipe
// that the reader polls beside stdin).
class Interrupts {
 public:
  // Installs the handler; until then SIGINT keeps its default action.
  static void install();
  static bool pending();
  // Clears the flag and the pipe (a Ctrl-C already acted on is not kept for later).
  static void clear();
  static int wake_fd();
};

class ChatInput {
 public:
  enum class Status { message, interrupted, end };
  struct Turn {
    Status status;
    std::string text;
  };
  // Reads `fd`; prints the prompts (">>> ", "... ") when `interactive`.
  ChatInput(int fd, bool interactive);
  // The next message; interrupted when Ctrl-C came while it was being typed
  // (what was typed is dropped), end at end of input (Ctrl-D).
  Turn next();

 private:
  enum class LineStatus { line, interrupted, end };
  LineStatus read_line(const char* prompt, std::string& line);

  int fd_;
  bool interactive_;
  std::string buffer_;  // read but not yet returned
  bool at_end_ = false;
};

}  // namespace fathom::cli
