#include "server/token_routes.h"

#include "server/http_errors.h"
#include "server/sse.h"

namespace fathom::server {
namespace {

void tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest request = parse_tokenize_request(parse_body(req.body));
  const std::vector<int32_t> ids =
      request.chat ? prepare_chat_prompt(ctx, *request.chat, request_deadline(ctx)).ids
                   : ctx.tokenizer.encode(request.text, request.add_special_tokens);
  res.set_content(dump_json({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.window}}),
                  "application/json");
}

void detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::vector<int32_t> ids = parse_detokenize_request(parse_body(req.body), ctx.tokenizer.vocab_size());
  const std::string text = ctx.tokenizer.decode(ids);
  // llama.cpp answers with "content", vLLM with "prompt".
  res.set_content(dump_json({{"content", text}, {"prompt", text}}), "application/json");
}

void count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const ChatRequest request = parse_count_tokens_request(parse_body(req.body));
  const PreparedPrompt prompt = prepare_chat_prompt(ctx, request, request_deadline(ctx));
  res.set_content(dump_json({{"input_tokens", prompt.ids.size()}}), "application/json");
}

}  // namespace

void add_token_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/tokenize", guarded(ctx, "/tokenize", ApiStyle::openai,
                                 [&ctx](const httplib::Request& req, httplib::Response& res) { tokenize(ctx, req, res); }));
  http.Post("/detokenize",
            guarded(ctx, "/detokenize", ApiStyle::openai,
                    [&ctx](const httplib::Request& req, httplib::Response& res) { detokenize(ctx, req, res); }));
  http.Post("/v1/messages/count_tokens",
            guarded(ctx, "/v1/messages/count_tokens", ApiStyle::anthropic,
                    [&ctx](const httplib::Request& req, httplib::Response& res) { count_tokens(ctx, req, res); }));
}

}  // namespace fathom::server
