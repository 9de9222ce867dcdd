#include "server/openai_routes.h"

#include "server/generation_session.h"
#include "server/http_errors.h"
#include "server/deferred_response.h"
#include "server/sse.h"
#include "server/tool_call_stream.h"

namespace fathom::server {

namespace {

std::string finish_reason_of(const GenerationSession& s, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  return s.finish_reason() == "stop" ? "stop" : "length";
}

// The prompt counts once however many choices share it; what the prefix
// cache gave it is the first choice's (the others fork that choice's prompt).
ojson usage_of(const std::vector<const GenerationSession*>& choices) {
  const GenerationSession& first = *choices.front();
  int64_t completion = 0, reasoning = 0;
  for (const GenerationSession* s : choices) completion += s->completion_tokens(), reasoning += s->reasoning_tokens();
  return {{"prompt_tokens", first.prompt_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens()}}},
          {"completion_tokens", completion},
          {"completion_tokens_details", {{"reasoning_tokens", reasoning}}},
          {"total_tokens", first.prompt_tokens() + completion}};
}

ojson usage_of(const GenerationSession& s) { return usage_of(std::vector<const GenerationSession*>{&s}); }

ojson token_bytes(const std::string& text) {
  ojson out = ojson::array();
  for (unsigned char c : text) out.push_back(int(c));
  return out;
}

// Chat logprobs entries: [{token, logprob, bytes, top_logprobs: [...]}].
ojson chat_logprobs(const ServerContext& ctx, const std::vector<TokenEvent>& tokens) {
  ojson content = ojson::array();
  for (const auto& t : tokens) {
    const std::string text = ctx.tokenizer.decode(std::vector<int32_t>{t.id});
    ojson top = ojson::array();
    for (const auto& [id, lp] : t.top) {
      const std::string alt = ctx.tokenizer.decode(std::vector<int32_t>{id});
      top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", token_bytes(alt)}});
    }
    content.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", token_bytes(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Completions logprobs: {tokens, token_logprobs, top_logprobs: [{token: lp}], text_offset}.
ojson completion_logprobs(const ServerContext& ctx, const std::vector<TokenEvent>& tokens, size_t offset) {
  ojson out = {{"tokens", ojson::array()}, {"token_logprobs", ojson::array()}, {"top_logprobs", ojson::array()},
               {"text_offset", ojson::array()}};
  for (const auto& t : tokens) {
    const std::string text = ctx.tokenizer.decode(std::vector<int32_t>{t.id});
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(t.logprob);
    ojson top = ojson::object();
    for (const auto& [id, lp] : t.top) top[ctx.tokenizer.decode(std::vector<int32_t>{id})] = lp;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(offset);
    offset += text.size();
  }
  return out;
}

// Streamed calls carry their index in the answer: the first of these is call `first`.
ojson tool_calls_json(const std::vector<ToolCall>& calls, bool streaming, size_t first = 0) {
  ojson out = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    ojson call = {{"id", random_id("call_")},
                  {"type", "function"},
                  {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streaming) call["index"] = first + i;
    out.push_back(call);
  }
  return out;
}

// One choice's chunks. A stream of one choice ends with its usage and
// [DONE]; with several (n > 1), chat_stream_trailer() writes them once all
// choices have ended, and every choice shares the stream's id and time.
class ChatStream final : public SseFormatter {
 public:
  ChatStream(const ServerContext& ctx, const ChatRequest& req, size_t index = 0, bool closes = true,
             std::string id = random_id("chatcmpl-"), int64_t created = unix_time())
      : ctx_(ctx), tools_(req.tools_enabled && ctx.tool_format != ToolCallFormat::none),
        logprobs_(req.gen.top_logprobs >= 0), include_usage_(req.gen.include_usage), closes_(closes),
        index_(index), id_(std::move(id)), created_(created),
        calls_(tools_ ? ctx.tool_format : ToolCallFormat::none, /*stream_arguments=*/true) {}

  std::string begin() override { return chunk({{"role", "assistant"}, {"content", ""}}, nullptr); }

  std::string delta(const Delta& d) override {
    std::string out;
    ojson logprobs = logprobs_ && !d.tokens.empty() ? chat_logprobs(ctx_, d.tokens) : ojson(nullptr);
    if (!d.reasoning.empty()) out += chunk({{"reasoning_content", d.reasoning}}, nullptr);
    // Text passes through as it comes; a tool call goes out once it is whole.
    ToolCallStream::Piece piece = calls_.push(d.content);
    if (!piece.content.empty() || !logprobs.is_null())
      out += chunk(piece.content.empty() ? ojson::object() : ojson{{"content", piece.content}}, nullptr, logprobs);
    out += calls(piece.calls);
    out += updates(piece.updates);
    return out;
  }

  std::string end(const GenerationSession& s) override {
    std::string out;
    if (auto failure = s.failure()) return sse_data(error_body(*failure, ApiStyle::openai)) + "data: [DONE]\n\n";
    ToolCallStream::Piece piece = calls_.finish();
    if (!piece.content.empty()) out += chunk({{"content", piece.content}}, nullptr);
    out += calls(piece.calls);
    out += updates(piece.updates);
    out += chunk(ojson::object(), finish_reason_of(s, calls_.calls() > 0));
    return closes_ ? out + trailer({&s}) : out;
  }

  // The usage chunk (when asked for) over every choice, and [DONE].
  std::string trailer(const std::vector<const GenerationSession*>& choices) const {
    std::string out;
    if (include_usage_) {
      ojson usage_chunk = base();
      usage_chunk["choices"] = ojson::array();
      usage_chunk["usage"] = usage_of(choices);
      out += sse_data(usage_chunk);
    }
    return out + "data: [DONE]\n\n";
  }

 private:
  ojson base() const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", ctx_.options.served_model_name},
            {"system_fingerprint", ctx_.system_fingerprint}};
  }
  // Calls complete now, each its own chunk, indexed after those sent before.
  std::string calls(const std::vector<ToolCall>& complete) {
    std::string out;
    for (const ToolCall& call : complete) out += chunk({{"tool_calls", tool_calls_json({call}, true, sent_calls_++)}}, nullptr);
    return out;
  }
  // Streamed calls: the first chunk names the call, the next ones carry its arguments.
  std::string updates(const std::vector<ToolCallStream::CallUpdate>& ups) {
    std::string out;
    for (const auto& u : ups) {
      if (u.begins) {
        streamed_ = sent_calls_++;
        out += chunk({{"tool_calls", ojson::array({{{"index", streamed_},
                                                   {"id", random_id("call_")},
                                                   {"type", "function"},
                                                   {"function", {{"name", u.name}, {"arguments", ""}}}}})}},
                     nullptr);
      }
      if (!u.arguments.empty())
        out += chunk({{"tool_calls", ojson::array({{{"index", streamed_}, {"function", {{"arguments", u.arguments}}}}})}},
                     nullptr);
    }
    return out;
  }
  std::string chunk(ojson delta, ojson finish_reason, ojson logprobs = nullptr) {
    ojson c = base();
    c["choices"] = ojson::array({{{"index", index_}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                                  {"finish_reason", std::move(finish_reason)}}});
    if (include_usage_) c["usage"] = nullptr;
    return sse_data(c);
  }

  const ServerContext& ctx_;
  const bool tools_, logprobs_, include_usage_, closes_;
  const size_t index_;
  const std::string id_;
  const int64_t created_;
  ToolCallStream calls_;
  size_t sent_calls_ = 0, streamed_ = 0;
};

void chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto deadline = request_deadline(ctx);
  const ChatRequest request = parse_chat_request(parse_body(req.body));
  const PreparedPrompt prompt = prepare_chat_prompt(ctx, request, deadline);
  const JobConstraint constraint = constrain_output(ctx, request.output, request.tools, prompt);
  // Every choice is its own job from its own seed; all but the first wait for
  // the first's prefill and start from a fork of it (the prompt's KV is shared).
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::shared_ptr<GenerationSession>> sessions;
  std::vector<GenerationSession*> choices;
  for (int64_t i = 0; i < request.gen.n; ++i) {
    GenerationFields gen = request.gen;
    gen.sampling.seed += uint64_t(i);
    auto job = make_job(ctx, prompt.ids, gen, deadline, constraint);
    if (i == 0) job->share_prompt = request.gen.n > 1;
    else job->prompt_source = jobs.front();
    submit_job(ctx, job);  // a 429 here cancels the choices before it (their sessions end)
    jobs.push_back(job);
    sessions.push_back(std::make_shared<GenerationSession>(ctx, job, request.gen.stop, ctx.has_thinking,
                                                           prompt.starts_in_reasoning));
    choices.push_back(sessions.back().get());
  }
  if (request.gen.stream && sessions.size() == 1)
    return stream_session(res, sessions.front(), std::make_shared<ChatStream>(ctx, request));
  if (request.gen.stream) {
    const std::string id = random_id("chatcmpl-");
    const int64_t created = unix_time();
    std::vector<std::shared_ptr<SseFormatter>> formatters;
    for (size_t i = 0; i < sessions.size(); ++i)
      formatters.push_back(std::make_shared<ChatStream>(ctx, request, i, /*closes=*/false, id, created));
    auto last = std::static_pointer_cast<ChatStream>(formatters.back());
    return stream_sessions(res, sessions, formatters, [last](const auto& all) {
      std::vector<const GenerationSession*> choices;
      for (const auto& s : all) choices.push_back(s.get());
      return last->trailer(choices);
    });
  }
  respond_when_all_done(res, choices, [&ctx, &request, &choices](std::vector<Delta>& all) {
    ojson answers = ojson::array();
    for (size_t i = 0; i < all.size(); ++i) {
      ojson message = {{"role", "assistant"}, {"content", all[i].content}, {"refusal", nullptr}};
      if (!all[i].reasoning.empty()) message["reasoning_content"] = all[i].reasoning;
      bool called = false;
      if (request.tools_enabled && ctx.tool_format != ToolCallFormat::none) {
        ParsedToolCalls parsed = parse_tool_calls(all[i].content, ctx.tool_format);
        if (!parsed.calls.empty()) {
          message["content"] = parsed.content.empty() ? ojson(nullptr) : ojson(parsed.content);
          message["tool_calls"] = tool_calls_json(parsed.calls, false);
          called = true;
        }
      }
      answers.push_back({{"index", i},
                         {"message", message},
                         {"logprobs", request.gen.top_logprobs >= 0 ? chat_logprobs(ctx, all[i].tokens) : ojson(nullptr)},
                         {"finish_reason", finish_reason_of(*choices[i], called)}});
    }
    ojson body = {{"id", random_id("chatcmpl-")},
                  {"object", "chat.completion"},
                  {"created", unix_time()},
                  {"model", ctx.options.served_model_name},
                  {"system_fingerprint", ctx.system_fingerprint},
                  {"choices", answers},
                  {"usage", usage_of(std::vector<const GenerationSession*>(choices.begin(), choices.end()))}};
    return dump_json(body);
  });
}

class CompletionStream final : public SseFormatter {
 public:
  CompletionStream(const ServerContext& ctx, const CompletionRequest& req)
      : ctx_(ctx), logprobs_(req.gen.top_logprobs >= 0), include_usage_(req.gen.include_usage) {}
  std::string begin() override { return {}; }
  std::string delta(const Delta& d) override {
    if (d.content.empty() && !logprobs_) return {};
    ojson lp = logprobs_ ? completion_logprobs(ctx_, d.tokens, offset_) : ojson(nullptr);
    offset_ += d.content.size();
    return chunk(d.content, nullptr, lp);
  }
  std::string end(const GenerationSession& s) override {
    if (auto failure = s.failure()) return sse_data(error_body(*failure, ApiStyle::openai)) + "data: [DONE]\n\n";
    std::string out = chunk("", finish_reason_of(s, false), nullptr);
    if (include_usage_) {
      ojson c = base();
      c["choices"] = ojson::array();
      c["usage"] = usage_of(s);
      out += sse_data(c);
    }
    return out + "data: [DONE]\n\n";
  }

 private:
  ojson base() const {
    return {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", ctx_.options.served_model_name}};
  }
  std::string chunk(const std::string& text, ojson finish_reason, ojson logprobs) {
    ojson c = base();
    c["choices"] = ojson::array({{{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)},
                                  {"finish_reason", std::move(finish_reason)}}});
    return sse_data(c);
  }
  const ServerContext& ctx_;
  const bool logprobs_, include_usage_;
  const std::string id_ = random_id("cmpl-");
  const int64_t created_ = unix_time();
  size_t offset_ = 0;
};

void completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const auto deadline = request_deadline(ctx);
  const CompletionRequest request = parse_completion_request(parse_body(req.body));
  const std::vector<int32_t> ids =
      request.prompt_ids.empty() ? ctx.tokenizer.encode(request.prompt, /*add_special_tokens=*/true) : request.prompt_ids;
  auto job = make_job(ctx, ids, request.gen, deadline, constrain_output(ctx, request.output, nullptr, {}));
  submit_job(ctx, job);
  auto session = std::make_shared<GenerationSession>(ctx, job, request.gen.stop, false, false);
  if (request.gen.stream) return stream_session(res, session, std::make_shared<CompletionStream>(ctx, request));
  respond_when_done(res, *session, [&ctx, &request, &session](Delta& all) {
    ojson body = {{"id", random_id("cmpl-")},
                  {"object", "text_completion"},
                  {"created", unix_time()},
                  {"model", ctx.options.served_model_name},
                  {"choices", ojson::array({{{"index", 0},
                                             {"text", all.content},
                                             {"logprobs", request.gen.top_logprobs >= 0
                                                              ? completion_logprobs(ctx, all.tokens, 0)
                                                              : ojson(nullptr)},
                                             {"finish_reason", finish_reason_of(*session, false)}}})},
                  {"usage", usage_of(*session)}};
    return dump_json(body);
  });
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/chat/completions",
            guarded(ctx, "/v1/chat/completions", ApiStyle::openai,
                    [&ctx](const httplib::Request& req, httplib::Response& res) { chat_completions(ctx, req, res); }));
  http.Post("/v1/completions",
            guarded(ctx, "/v1/completions", ApiStyle::openai,
                    [&ctx](const httplib::Request& req, httplib::Response& res) { completions(ctx, req, res); }));
  auto model_json = [&ctx] {
    return ojson{{"id", ctx.options.served_model_name}, {"object", "model"}, {"created", ctx.started_at},
                 {"owned_by", "fathom"}, {"context_length", ctx.context_length}};
  };
  // Anthropic's clients send anthropic-version and read its own shape of the list.
  auto anthropic_model_json = [&ctx] {
    return ojson{{"type", "model"},
                 {"id", ctx.options.served_model_name},
                 {"display_name", ctx.options.served_model_name},
                 {"created_at", rfc3339(ctx.started_at)}};
  };
  http.Get("/v1/models", guarded(ctx, "/v1/models", ApiStyle::openai,
                                 [&ctx, model_json, anthropic_model_json](const httplib::Request& req,
                                                                          httplib::Response& res) {
                                   ojson body;
                                   if (req.has_header("anthropic-version"))
                                     body = {{"data", ojson::array({anthropic_model_json()})},
                                             {"has_more", false},
                                             {"first_id", ctx.options.served_model_name},
                                             {"last_id", ctx.options.served_model_name}};
                                   else
                                     body = {{"object", "list"}, {"data", ojson::array({model_json()})}};
                                   res.set_content(dump_json(body), "application/json");
                                 }));
  http.Get(R"(/v1/models/(.+))",
           guarded(ctx, "/v1/models/{id}", ApiStyle::openai,
                   [&ctx, model_json, anthropic_model_json](const httplib::Request& req, httplib::Response& res) {
                     if (req.matches[1] != ctx.options.served_model_name)
                       throw ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist", "model",
                                      "invalid_request_error", "model_not_found");
                     res.set_content(dump_json(req.has_header("anthropic-version") ? anthropic_model_json()
                                                                                    : model_json()),
                                     "application/json");
                   }));
}

}  // namespace fathom::server
