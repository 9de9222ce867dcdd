#include "server/request_parsing.h"

#include <gtest/gtest.h>

namespace fathom::server {

namespace {
std::string param_of(const std::string& body) {
  try {
    parse_chat_request(parse_body(body));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  }
  return "<accepted>";
}
}  // namespace

TEST(RequestParsing, ChatFieldsAndArrayOfPartsContent) {
  const auto r = parse_chat_request(parse_body(R"({
    "model": "x", "unknown_field": {"a": 1},
    "messages": [{"role": "developer", "content": "be brief"},
                 {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 42,
    "stop": "END", "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "logit_bias": {"15": -100}, "logprobs": true, "top_logprobs": 3, "stream": true,
    "stream_options": {"include_usage": true}, "chat_template_kwargs": {"enable_thinking": false},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "auto"})"));
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "Hi there");
  EXPECT_EQ(*r.gen.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.gen.sampling.temperature, 0.5f);
  EXPECT_EQ(r.gen.sampling.top_k, 40);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"END"});
  ASSERT_EQ(r.gen.logit_bias.size(), 1u);
  EXPECT_EQ(r.gen.logit_bias[0].first, 15);
  EXPECT_EQ(r.gen.top_logprobs, 3);
  EXPECT_TRUE(r.gen.stream && r.gen.include_usage && r.tools_enabled);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(RequestParsing, WrongTypesAndRangesNameTheField) {
  EXPECT_EQ(param_of(R"({"messages": "hi"})"), "messages");
  EXPECT_EQ(param_of(R"({})"), "messages");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})"), "temperature");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})"), "temperature");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "top_p": 1.5})"), "top_p");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "n": 17})"), "n");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "n": 2, "stream": true})"), "<accepted>");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})"),
            "response_format.type");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})"),
            "response_format.json_schema");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"a": 1}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "wizard", "content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})"), "stop");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})"), "tools");
}

TEST(RequestParsing, StructuredOutputAndForcedToolsBecomeOutputConstraints) {
  using Kind = OutputConstraint::Kind;
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}])";
  auto chat = [](const std::string& extra) {
    return parse_chat_request(parse_body(R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}"));
  };
  EXPECT_EQ(chat(R"("max_tokens": 1)").output.kind, Kind::none);
  EXPECT_EQ(chat(R"("response_format": {"type": "text"})").output.kind, Kind::none);
  EXPECT_EQ(chat(R"("response_format": {"type": "json_object"})").output.kind, Kind::json_object);
  const auto schema = chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}})");
  EXPECT_EQ(schema.output.kind, Kind::json_schema);
  EXPECT_EQ(schema.output.schema, ojson::parse(R"({"type": "integer"})"));
  EXPECT_EQ(schema.output.param, "response_format.json_schema.schema");
  const auto required = chat(tools + R"(, "tool_choice": "required")");
  EXPECT_EQ(required.output.kind, Kind::tool_call);
  EXPECT_EQ(required.output.tool_name, "");
  const auto named = chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})");
  EXPECT_EQ(named.output.kind, Kind::tool_call);
  EXPECT_EQ(named.output.tool_name, "g");
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "auto")").output.kind, Kind::none);

  auto messages = [](const std::string& extra) {
    return parse_messages_request(parse_body(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], )" + extra + "}"));
  };
  const std::string anthropic_tools = R"("tools": [{"name": "f", "input_schema": {"type": "object"}}])";
  EXPECT_EQ(messages(anthropic_tools + R"(, "tool_choice": {"type": "any"})").output.kind, Kind::tool_call);
  EXPECT_EQ(messages(anthropic_tools + R"(, "tool_choice": {"type": "tool", "name": "f"})").output.tool_name, "f");
  EXPECT_THROW(messages(anthropic_tools + R"(, "tool_choice": {"type": "tool", "name": "nope"})"), ApiError);
  EXPECT_EQ(messages(R"("output_format": {"type": "json_schema", "schema": {"type": "boolean"}})").output.kind,
            Kind::json_schema);
}

TEST(RequestParsing, IntegersOutsideInt64AreRefusedNotConverted) {
  // 2^63 as a float or an unsigned integer used to be converted to int64 (undefined behaviour).
  for (const char* seed : {"9223372036854775808", "9223372036854775808.0", "1e300", "-1e19", "18446744073709551615"})
    EXPECT_EQ(param_of(std::string(R"({"messages": [{"role": "user", "content": "x"}], "seed": )") + seed + "}"), "seed")
        << seed;
  for (const char* seed : {"9223372036854775807", "-9223372036854775808", "4.0e3"})
    EXPECT_EQ(param_of(std::string(R"({"messages": [{"role": "user", "content": "x"}], "seed": )") + seed + "}"),
              "<accepted>")
        << seed;
  const auto r = parse_chat_request(parse_body(R"({"messages": [{"role": "user", "content": "x"}], "seed": -9223372036854775808})"));
  EXPECT_EQ(r.gen.sampling.seed, uint64_t(1) << 63);
}

TEST(RequestParsing, MalformedJsonAndInvalidUtf8AreApiErrors) {
  EXPECT_THROW(parse_body("{\"messages\": ["), ApiError);
  EXPECT_THROW(parse_body("[1, 2]"), ApiError);
  EXPECT_THROW(parse_body("{\"a\": \"\xff\xfe\"}"), ApiError);
}

TEST(RequestParsing, AnthropicMessages) {
  const auto r = parse_messages_request(parse_body(R"({
    "model": "x", "max_tokens": 5, "system": "sys", "stop_sequences": ["\n\n"],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {"c": 1}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}],
    "tools": [{"name": "w", "description": "d", "input_schema": {"type": "object"}}]})"));
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "w");
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["content"], "sunny");
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(*r.gen.max_tokens, 5);
  EXPECT_THROW(parse_messages_request(parse_body(R"({"messages": [{"role": "user", "content": "x"}]})")), ApiError);
}

}  // namespace fathom::server
