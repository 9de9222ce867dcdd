// The Responses API's request translation and its bounded response store.
#include <gtest/gtest.h>

#include "server/response_store.h"
#include "server/responses_request.h"

namespace fathom::server {

TEST(ResponsesRequest, ItemsBecomeChatMessagesAfterTheHistory) {
  const ojson history = ojson::parse(R"([{"type": "message", "role": "user", "content": "first"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}])");
  const ojson body = ojson::parse(R"({"instructions": "Be brief.", "max_output_tokens": 9, "previous_response_id": "resp_1",
    "input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\": 1}"},
              {"type": "function_call_output", "call_id": "c1", "output": "2"},
              {"role": "developer", "content": [{"type": "input_text", "text": "go on"}]}],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": {"type": "function", "name": "f"},
    "text": {"format": {"type": "json_schema", "name": "v", "schema": {"type": "boolean"}}}, "store": false})");
  const ResponsesRequest r = parse_responses_request(body, history);
  const ojson& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "Be brief.");
  EXPECT_EQ(m[1]["content"], "first");
  // The call joins the assistant turn before it; its arguments are an object for the template.
  EXPECT_EQ(m[2]["content"], "ok");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"x": 1})"));
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "c1");
  EXPECT_EQ(m[4]["role"], "system");
  EXPECT_EQ(*r.chat.gen.max_tokens, 9);
  EXPECT_EQ(r.chat.output.kind, OutputConstraint::Kind::tool_call);  // the named tool wins over text.format
  EXPECT_EQ(r.chat.output.tool_name, "f");
  EXPECT_FALSE(r.store);
  EXPECT_EQ(*r.previous_response_id, "resp_1");
  EXPECT_EQ(r.input_items.size(), 3u);
}

TEST(ResponsesRequest, BadItemsNameTheirField) {
  auto param_of = [](const char* body) {
    try {
      parse_responses_request(ojson::parse(body), ojson::array());
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(param_of(R"({})"), "input");
  EXPECT_EQ(param_of(R"({"input": 3})"), "input");
  EXPECT_EQ(param_of(R"({"input": [{"type": "function_call", "call_id": "c"}]})"), "input[0].name");
  EXPECT_EQ(param_of(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})"), "input[0].content[0].type");
  EXPECT_EQ(param_of(R"({"input": "x", "tools": [{"type": "file_search"}]})"), "tools[0].type");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"format": {"type": "yaml"}}})"), "text.format.type");
  EXPECT_EQ(param_of(R"({"input": "x", "previous_response_id": 5})"), "previous_response_id");
  EXPECT_EQ(param_of(R"({"input": "x"})"), "<accepted>");
}

TEST(ResponseStore, KeepsTheMostRecentWithinItsBounds) {
  ResponseStore store(3, 1 << 20);
  for (int i = 0; i < 5; ++i) store.put("r" + std::to_string(i), ojson::array({i}));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.get("r0"));
  EXPECT_FALSE(store.get("r1"));
  ASSERT_TRUE(store.get("r2"));  // now the most recent: r3 goes next
  store.put("r5", ojson::array());
  EXPECT_FALSE(store.get("r3"));
  EXPECT_EQ((*store.get("r4"))[0], 4);
  // Bytes bound: an entry larger than the whole store is not kept, and big ones push out old ones.
  ResponseStore small(100, 64);
  small.put("big", ojson::array({std::string(100, 'x')}));
  EXPECT_FALSE(small.get("big"));
  small.put("a", ojson::array({std::string(30, 'a')}));
  small.put("b", ojson::array({std::string(30, 'b')}));
  EXPECT_FALSE(small.get("a"));
  EXPECT_TRUE(small.get("b"));
}

}  // namespace fathom::server
