#include "server/anthropic_routes.h"

#include "server/bounded_json.h"

#include "server/generation_session.h"
#include "server/http_errors.h"
#include "server/deferred_response.h"
#include "server/sse.h"
#include "server/tool_call_stream.h"

namespace fathom::server {

namespace {

std::string stop_reason_of(const GenerationSession& s, bool tool_use) {
  if (tool_use) return "tool_use";
  if (s.stopped_by_string()) return "stop_sequence";
  return s.finish_reason() == "stop" ? "end_turn" : "max_tokens";
}

// Anthropic counts input tokens read from the cache apart from the others:
// input_tokens + cache_read_input_tokens is the whole prompt.
ojson usage_of(const GenerationSession& s) {
  return {{"input_tokens", s.prompt_tokens() - s.cached_tokens()},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", s.cached_tokens()},
          {"output_tokens", s.completion_tokens()}};
}

ojson tool_use_block(const ToolCall& call) {
  ojson input = parse_json_bounded(call.arguments);
  if (input.is_discarded() || !input.is_object()) input = ojson::object();
  return {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", call.name}, {"input", input}};
}

// Streams: message_start, then per block content_block_start / *_delta /
// content_block_stop, then message_delta (stop_reason, usage) and message_stop.
class MessagesStream final : public SseFormatter {
 public:
  MessagesStream(const ServerContext& ctx, const ChatRequest& req, int64_t prompt_tokens)
      : ctx_(ctx), tools_(req.tools_enabled && ctx.tool_format != ToolCallFormat::none),
        prompt_tokens_(prompt_tokens),
        calls_(tools_ ? ctx.tool_format : ToolCallFormat::none, /*stream_arguments=*/true) {}

  std::string begin() override {
    ojson message = {{"id", id_},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", ctx_.options.served_model_name},
                     {"content", ojson::array()},
                     {"stop_reason", nullptr},
                     {"stop_sequence", nullptr},
                     {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}}}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", message}}) +
           sse_event("ping", {{"type", "ping"}});
  }

  std::string delta(const Delta& d) override {
    std::string out;
    if (!d.reasoning.empty()) {
      out += open_block("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                               {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
    }
    // Text passes through as it comes; a tool_use block goes out once its call is whole.
    ToolCallStream::Piece piece = calls_.push(d.content);
    if (!piece.content.empty()) out += text(piece.content);
    for (const ToolCall& call : piece.calls) out += tool_use(call);
    out += updates(piece.updates);
    return out;
  }

  std::string end(const GenerationSession& s) override {
    std::string out;
    if (auto failure = s.failure()) return sse_event("error", error_body(*failure, ApiStyle::anthropic));
    ToolCallStream::Piece piece = calls_.finish();
    if (!piece.content.empty()) out += text(piece.content);
    for (const ToolCall& call : piece.calls) out += tool_use(call);
    out += updates(piece.updates);
    const bool tool_use = calls_.calls() > 0;
    if (!started_) out += text("");  // every message has at least one block
    out += close_block();
    const ojson stop_sequence = s.stopped_by_string() ? ojson(s.stop_sequence()) : ojson(nullptr);
    out += sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason_of(s, tool_use)}, {"stop_sequence", stop_sequence}}},
                                       {"usage", usage_of(s)}});
    return out + sse_event("message_stop", {{"type", "message_stop"}});
  }

 private:
  // A tool_use block: its input as one input_json_delta, then closed.
  std::string tool_use(const ToolCall& call) {
    ojson block = tool_use_block(call);
    const std::string input = block["input"].dump();
    block["input"] = ojson::object();
    std::string out = open_block("tool_use", block);
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                             {"delta", {{"type", "input_json_delta"}, {"partial_json", input}}}});
    return out + close_block();
  }
  // A streamed call: its tool_use block opens with the name, its input
  // arrives as input_json_delta pieces, and it closes with the call.
  std::string updates(const std::vector<ToolCallStream::CallUpdate>& ups) {
    std::string out;
    for (const auto& u : ups) {
      if (u.begins) {
        out += close_block();
        out += open_block("tool_use", {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", u.name},
                                       {"input", ojson::object()}});
      }
      if (!u.arguments.empty())
        out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                                 {"delta", {{"type", "input_json_delta"}, {"partial_json", u.arguments}}}});
      if (u.ends) out += close_block();
    }
    return out;
  }
  std::string text(const std::string& t) {
    std::string out = open_block("text", {{"type", "text"}, {"text", ""}});
    return out + sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                                   {"delta", {{"type", "text_delta"}, {"text", t}}}});
  }
  // Opens a block of `type` unless one is open already; closes another type first.
  std::string open_block(const std::string& type, const ojson& block) {
    if (open_ == type) return {};
    std::string out = close_block();
    if (started_) ++index_;
    started_ = true;
    open_ = type;
    return out + sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }
  std::string close_block() {
    if (open_.empty()) return {};
    std::string out;
    if (open_ == "thinking")
      out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                               {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    open_.clear();
    return out + sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }

  const ServerContext& ctx_;
  const bool tools_;
  const int64_t prompt_tokens_;
  const std::string id_ = random_id("msg_");
  ToolCallStream calls_;
  std::string open_;
  int index_ = 0;
  bool started_ = false;
};

void messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto deadline = request_deadline(ctx);
  const ChatRequest request = parse_messages_request(parse_body(req.body));
  const PreparedPrompt prompt = prepare_chat_prompt(ctx, request, deadline);
  auto job = make_job(ctx, prompt.ids, request.gen, deadline,
                      constrain_output(ctx, request.output, request.tools, prompt));
  submit_job(ctx, job);
  auto session = std::make_shared<GenerationSession>(ctx, job, request.gen.stop, ctx.has_thinking,
                                                     prompt.starts_in_reasoning);
  if (request.gen.stream)
    return stream_session(res, session, std::make_shared<MessagesStream>(ctx, request, int64_t(prompt.ids.size())));
  respond_when_done(res, *session, [&ctx, &request, &session](Delta& all) {
    ojson content = ojson::array();
    if (!all.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", all.reasoning}, {"signature", ""}});
    bool tool_use = false;
    std::string text = all.content;
    std::vector<ToolCall> calls;
    if (request.tools_enabled && ctx.tool_format != ToolCallFormat::none) {
      ParsedToolCalls parsed = parse_tool_calls(all.content, ctx.tool_format);
      text = parsed.content;
      calls = std::move(parsed.calls);
    }
    if (!text.empty() || calls.empty()) content.push_back({{"type", "text"}, {"text", text}});
    for (const auto& call : calls) {
      content.push_back(tool_use_block(call));
      tool_use = true;
    }
    ojson body = {{"id", random_id("msg_")},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", ctx.options.served_model_name},
                  {"content", content},
                  {"stop_reason", stop_reason_of(*session, tool_use)},
                  {"stop_sequence", session->stopped_by_string() ? ojson(session->stop_sequence()) : ojson(nullptr)},
                  {"usage", usage_of(*session)}};
    return dump_json(body);
  });
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/messages",
            guarded(ctx, "/v1/messages", ApiStyle::anthropic,
                    [&ctx](const httplib::Request& req, httplib::Response& res) { messages(ctx, req, res); }));
}

}  // namespace fathom::server
