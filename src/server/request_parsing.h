#pragma once
// Request bodies (OpenAI chat/completions, Anthropic messages) → native structs.
// Unknown fields are ignored; a field of the wrong type or out of range is an
// ApiError naming it (HTTP 400).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"

namespace fathom::server {

using ojson = nlohmann::ordered_json;

// What one request may hold, besides the body size (--max-body-mib) and the
// context length (max_tokens is cut to the room left). Each excess is a 400
// naming the field.
namespace limits {
inline constexpr int kJsonDepth = 64;               // arrays and objects nested anywhere in the body
inline constexpr size_t kJsonObjectKeys = 1024;     // keys in one object (tool schemas included)
inline constexpr size_t kJsonKeys = 65536;          // keys in the whole body
inline constexpr size_t kMessages = 4096;
inline constexpr size_t kTools = 128;
inline constexpr size_t kStopStrings = 16;
inline constexpr size_t kStopStringBytes = 1024;
inline constexpr size_t kLogitBiasEntries = 1000;
inline constexpr int kTopLogprobs = 20;
}  // namespace limits

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string type = "invalid_request_error",
           std::string code = {})
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)),
        code(std::move(code)) {}
  int status;
  std::string param, type, code;
};

// What every generation endpoint shares.
struct GenerationFields {
  std::optional<int64_t> max_tokens;
  SamplingParams sampling;
  bool seed_given = false;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  int top_logprobs = -1;  // -1: logprobs off
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int64_t n = 1;  // choices (OpenAI n), each from its own seed
};

// What the answer must be (structured output), enforced by a grammar over
// the model's tokens (server/structured_output.h).
struct OutputConstraint {
  enum class Kind { none, json_object, json_schema, tool_call };
  Kind kind = Kind::none;
  ojson schema;           // json_schema: the JSON Schema (true: any JSON value)
  std::string tool_name;  // tool_call: the tool required; empty: any of the request's tools
  std::string param;      // the request field it came from (named in errors)
};

struct ChatRequest {
  ojson messages;              // normalized for the chat template: content is a string
  ojson tools;                 // null or an array of {"type": "function", "function": {...}}
  bool tools_enabled = false;  // tools given and tool_choice is not "none"
  ojson chat_template_kwargs = ojson::object();
  OutputConstraint output;
  GenerationFields gen;
};

// The most choices one request may ask for (n).
inline constexpr int64_t kMaxChoices = 16;

struct CompletionRequest {
  std::string prompt;
  std::vector<int32_t> prompt_ids;  // when the prompt was given as token ids
  OutputConstraint output;          // response_format (json_object or json_schema)
  GenerationFields gen;
};

// Parses the body; malformed JSON (including invalid UTF-8) is an ApiError.
ojson parse_body(const std::string& body);

ChatRequest parse_chat_request(const ojson& body);
CompletionRequest parse_completion_request(const ojson& body);
// Anthropic Messages: system, messages with content blocks (text, tool_use,
// tool_result), tools with input_schema, max_tokens (required), stop_sequences.
ChatRequest parse_messages_request(const ojson& body);

// POST /tokenize, in the forms llama.cpp's and vLLM's servers take:
// {"content": text, "add_special": bool = false} (llama.cpp),
// {"prompt": text, "add_special_tokens": bool = true} (vLLM), or
// {"messages": [...]} rendered through the chat template with the generation prompt (vLLM).
struct TokenizeRequest {
  std::string text;
  bool add_special_tokens = false;
  std::optional<ChatRequest> chat;  // set for the messages form
};
TokenizeRequest parse_tokenize_request(const ojson& body);
// POST /detokenize: {"tokens": [ids]}; every id must be in [0, vocab).
std::vector<int32_t> parse_detokenize_request(const ojson& body, int64_t vocab);
// POST /v1/messages/count_tokens: a Messages request without max_tokens.
ChatRequest parse_count_tokens_request(const ojson& body);

}  // namespace fathom::server
