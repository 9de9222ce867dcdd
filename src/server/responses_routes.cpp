#include "server/responses_routes.h"

#include "server/deferred_response.h"
#include "server/generation_session.h"
#include "server/http_errors.h"
#include "server/responses_request.h"
#include "server/sse.h"
#include "server/tool_call_stream.h"

namespace fathom::server {

namespace {

// What every response object of one request shares.
struct ResponseFrame {
  std::string id = random_id("resp_");
  int64_t created_at = unix_time();
  ojson echo;
  std::optional<std::string> previous;
  bool store = true;
  ojson history;      // the conversation before this request (stored responses' items)
  ojson input_items;  // this request's input
};

ojson echoed(const ojson& echo, const char* key, ojson fallback) {
  const auto it = echo.find(key);
  return it == echo.end() ? std::move(fallback) : *it;
}

ojson usage_of(const GenerationSession& s) {
  return {{"input_tokens", s.prompt_tokens()},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens()}}},
          {"output_tokens", s.completion_tokens()},
          {"output_tokens_details", {{"reasoning_tokens", s.reasoning_tokens()}}},
          {"total_tokens", s.prompt_tokens() + s.completion_tokens()}};
}

ojson response_object(const ServerContext& ctx, const ResponseFrame& f, const std::string& status, ojson output,
                      ojson usage, ojson incomplete = nullptr, ojson error = nullptr) {
  return {{"id", f.id},
          {"object", "response"},
          {"created_at", f.created_at},
          {"status", status},
          {"error", std::move(error)},
          {"incomplete_details", std::move(incomplete)},
          {"instructions", echoed(f.echo, "instructions", nullptr)},
          {"max_output_tokens", echoed(f.echo, "max_output_tokens", nullptr)},
          {"model", ctx.options.served_model_name},
          {"output", std::move(output)},
          {"parallel_tool_calls", echoed(f.echo, "parallel_tool_calls", true)},
          {"previous_response_id", f.previous ? ojson(*f.previous) : ojson(nullptr)},
          {"reasoning", echoed(f.echo, "reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
          {"store", f.store},
          {"temperature", echoed(f.echo, "temperature", 1.0)},
          {"text", echoed(f.echo, "text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", echoed(f.echo, "tool_choice", "auto")},
          {"tools", echoed(f.echo, "tools", ojson::array())},
          {"top_p", echoed(f.echo, "top_p", 1.0)},
          {"truncation", "disabled"},
          {"usage", std::move(usage)},
          {"user", echoed(f.echo, "user", nullptr)},
          {"metadata", echoed(f.echo, "metadata", ojson::object())}};
}

ojson text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}};
}

ojson message_item(const std::string& id, const std::string& text, const char* status) {
  ojson content = ojson::array();
  if (std::string(status) == "completed") content.push_back(text_part(text));
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

ojson reasoning_item(const std::string& id, const std::string& text) {
  ojson summary = ojson::array();
  if (!text.empty()) summary.push_back({{"type", "summary_text"}, {"text", text}});
  return {{"type", "reasoning"}, {"id", id}, {"summary", std::move(summary)}};
}

ojson call_item(const std::string& id, const std::string& call_id, const ToolCall& call, const char* status) {
  return {{"type", "function_call"}, {"id", id},         {"call_id", call_id},
          {"name", call.name},       {"arguments", std::string(status) == "completed" ? call.arguments : ""},
          {"status", status}};
}

// The response's status and incomplete_details from how generation ended.
std::pair<std::string, ojson> ending(const GenerationSession& s) {
  if (s.finish_reason() == "length") return {"incomplete", {{"reason", "max_output_tokens"}}};
  return {"completed", nullptr};
}

void store(ServerContext& ctx, const ResponseFrame& f, const ojson& output) {
  if (!f.store) return;
  ojson items = f.history;
  for (const auto& i : f.input_items) items.push_back(i);
  for (const auto& i : output) items.push_back(i);
  ctx.responses.put(f.id, std::move(items));
}

class ResponsesStream final : public SseFormatter {
 public:
  ResponsesStream(ServerContext& ctx, ResponseFrame frame, bool tools)
      : ctx_(ctx), f_(std::move(frame)), calls_(tools ? ctx.tool_format : ToolCallFormat::none, /*stream_arguments=*/true) {}

  std::string begin() override {
    const ojson r = response_object(ctx_, f_, "in_progress", ojson::array(), nullptr);
    std::string out = event("response.created", {{"response", r}});
    return out + event("response.in_progress", {{"response", r}});
  }

  std::string delta(const Delta& d) override {
    std::string out;
    if (!d.reasoning.empty()) out += reasoning(d.reasoning);
    out += answer(calls_.push(d.content));
    return out;
  }

  std::string end(const GenerationSession& s) override {
    if (auto failure = s.failure()) {
      const ojson error = {{"code", failure->code.empty() ? failure->type : failure->code}, {"message", failure->what()}};
      return event("response.failed", {{"response", response_object(ctx_, f_, "failed", items_, nullptr, nullptr, error)}});
    }
    std::string out = answer(calls_.finish());
    out += close_reasoning();
    out += close_message();
    const auto [status, incomplete] = ending(s);
    store(ctx_, f_, items_);
    const ojson r = response_object(ctx_, f_, status, items_, usage_of(s), incomplete);
    return out + event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
  }

 private:
  std::string event(const char* type, ojson payload) {
    ojson e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : payload.items()) e[k] = std::move(v);
    return sse_event(type, e);
  }
  size_t next_index() const { return items_.size(); }

  std::string reasoning(const std::string& text) {
    std::string out;
    if (reasoning_id_.empty()) {
      out += close_message();
      reasoning_id_ = random_id("rs_");
      reasoning_index_ = next_index() + (message_id_.empty() ? 0 : 1);
      out += event("response.output_item.added", {{"output_index", reasoning_index_}, {"item", reasoning_item(reasoning_id_, "")}});
      out += event("response.reasoning_summary_part.added",
                   {{"item_id", reasoning_id_}, {"output_index", reasoning_index_}, {"summary_index", 0},
                    {"part", {{"type", "summary_text"}, {"text", ""}}}});
    }
    reasoning_text_ += text;
    return out + event("response.reasoning_summary_text.delta", {{"item_id", reasoning_id_}, {"output_index", reasoning_index_},
                                                                 {"summary_index", 0}, {"delta", text}});
  }

  std::string close_reasoning() {
    if (reasoning_id_.empty()) return {};
    std::string out = event("response.reasoning_summary_text.done", {{"item_id", reasoning_id_}, {"output_index", reasoning_index_},
                                                                     {"summary_index", 0}, {"text", reasoning_text_}});
    out += event("response.reasoning_summary_part.done",
                 {{"item_id", reasoning_id_}, {"output_index", reasoning_index_}, {"summary_index", 0},
                  {"part", {{"type", "summary_text"}, {"text", reasoning_text_}}}});
    const ojson item = reasoning_item(reasoning_id_, reasoning_text_);
    out += event("response.output_item.done", {{"output_index", reasoning_index_}, {"item", item}});
    items_.push_back(item);
    reasoning_id_.clear();
    reasoning_text_.clear();
    return out;
  }

  std::string answer(const ToolCallStream::Piece& piece) {
    std::string out;
    if (!piece.content.empty()) {
      out += close_reasoning();
      if (message_id_.empty()) {
        message_id_ = random_id("msg_");
        out += event("response.output_item.added",
                     {{"output_index", next_index()}, {"item", message_item(message_id_, "", "in_progress")}});
        out += event("response.content_part.added", {{"item_id", message_id_}, {"output_index", next_index()},
                                                     {"content_index", 0}, {"part", text_part("")}});
      }
      text_ += piece.content;
      out += event("response.output_text.delta", {{"item_id", message_id_}, {"output_index", next_index()},
                                                  {"content_index", 0}, {"delta", piece.content},
                                                  {"logprobs", ojson::array()}});
    }
    for (const ToolCall& call : piece.calls) {
      out += close_reasoning();
      out += close_message();
      const std::string id = random_id("fc_"), call_id = random_id("call_");
      const size_t index = next_index();
      out += event("response.output_item.added", {{"output_index", index}, {"item", call_item(id, call_id, call, "in_progress")}});
      out += event("response.function_call_arguments.delta",
                   {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
      out += event("response.function_call_arguments.done",
                   {{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}});
      const ojson item = call_item(id, call_id, call, "completed");
      out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
      items_.push_back(item);
    }
    // A streamed call: announced with its name, its arguments as they come, done at its end.
    for (const auto& u : piece.updates) {
      if (u.begins) {
        out += close_reasoning();
        out += close_message();
        call_ = {random_id("fc_"), random_id("call_"), next_index(), u.name, ""};
        out += event("response.output_item.added",
                     {{"output_index", call_.index}, {"item", call_item(call_.id, call_.call_id, {u.name, ""}, "in_progress")}});
      }
      if (!u.arguments.empty()) {
        call_.arguments += u.arguments;
        out += event("response.function_call_arguments.delta",
                     {{"item_id", call_.id}, {"output_index", call_.index}, {"delta", u.arguments}});
      }
      if (u.ends) {
        out += event("response.function_call_arguments.done", {{"item_id", call_.id}, {"output_index", call_.index},
                                                                {"name", call_.name}, {"arguments", call_.arguments}});
        const ojson item = call_item(call_.id, call_.call_id, {call_.name, call_.arguments}, "completed");
        out += event("response.output_item.done", {{"output_index", call_.index}, {"item", item}});
        items_.push_back(item);
      }
    }
    return out;
  }

  std::string close_message() {
    if (message_id_.empty()) return {};
    const size_t index = next_index();
    std::string out = event("response.output_text.done", {{"item_id", message_id_}, {"output_index", index},
                                                          {"content_index", 0}, {"text", text_}, {"logprobs", ojson::array()}});
    out += event("response.content_part.done", {{"item_id", message_id_}, {"output_index", index},
                                                {"content_index", 0}, {"part", text_part(text_)}});
    const ojson item = message_item(message_id_, text_, "completed");
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    items_.push_back(item);
    message_id_.clear();
    text_.clear();
    return out;
  }

  ServerContext& ctx_;
  ResponseFrame f_;
  ToolCallStream calls_;
  ojson items_ = ojson::array();  // finished output items
  int64_t sequence_ = 0;
  std::string message_id_, text_, reasoning_id_, reasoning_text_;
  size_t reasoning_index_ = 0;
  struct StreamedCall {
    std::string id, call_id;
    size_t index = 0;
    std::string name, arguments;
  } call_;  // the call being streamed
};

void create_response(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto deadline = request_deadline(ctx);
  const ojson body = parse_body(req.body);
  ResponseFrame frame;
  frame.history = ojson::array();
  if (const auto previous = previous_response_id(body)) {
    auto items = ctx.responses.get(*previous);
    if (!items)
      throw ApiError(404, "Previous response with id '" + *previous + "' not found.", "previous_response_id",
                     "invalid_request_error", "previous_response_not_found");
    frame.history = std::move(*items);
  }
  const ResponsesRequest request = parse_responses_request(body, frame.history);
  frame.echo = request.echo;
  frame.previous = request.previous_response_id;
  frame.store = request.store;
  frame.input_items = request.input_items;
  const ChatRequest& chat = request.chat;
  const PreparedPrompt prompt = prepare_chat_prompt(ctx, chat, deadline);
  auto job = make_job(ctx, prompt.ids, chat.gen, deadline, constrain_output(ctx, chat.output, chat.tools, prompt));
  submit_job(ctx, job);
  auto session = std::make_shared<GenerationSession>(ctx, job, chat.gen.stop, ctx.has_thinking, prompt.starts_in_reasoning);
  const bool tools = chat.tools_enabled && ctx.tool_format != ToolCallFormat::none;
  if (chat.gen.stream)
    return stream_session(res, session, std::make_shared<ResponsesStream>(ctx, std::move(frame), tools));
  respond_when_done(res, *session, [&](Delta& all) {
    ojson output = ojson::array();
    if (!all.reasoning.empty()) output.push_back(reasoning_item(random_id("rs_"), all.reasoning));
    ParsedToolCalls parsed{all.content, {}};
    if (tools) parsed = parse_tool_calls(all.content, ctx.tool_format);
    if (!parsed.content.empty() || parsed.calls.empty())
      output.push_back(message_item(random_id("msg_"), parsed.calls.empty() ? all.content : parsed.content, "completed"));
    for (const ToolCall& call : parsed.calls) output.push_back(call_item(random_id("fc_"), random_id("call_"), call, "completed"));
    const auto [status, incomplete] = ending(*session);
    store(ctx, frame, output);
    return dump_json(response_object(ctx, frame, status, output, usage_of(*session), incomplete));
  });
}

}  // namespace

void add_responses_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/responses", guarded(ctx, "/v1/responses", ApiStyle::openai, [&ctx](const auto& req, auto& res) {
              create_response(ctx, req, res);
            }));
}

}  // namespace fathom::server
