#include "server/metrics.h"

#include <gtest/gtest.h>

namespace fathom::server {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.generated_tokens += 3;
  m.time_to_first_token.observe(0.02);
  m.time_to_first_token.observe(100.0);
  Metrics::MemoryReading memory;
  memory.budget = 8000;
  memory.predicted = 5000;
  memory.resident = 4321;
  const std::string text = m.render(memory);
  EXPECT_NE(text.find("fathom_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_generation_tokens_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE fathom_inter_token_latency_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("fathom_kv_cache_bytes_in_use 0"), std::string::npos);
  EXPECT_NE(text.find("# TYPE fathom_memory_budget_bytes gauge\nfathom_memory_budget_bytes 8000\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_memory_predicted_bytes 5000\n"), std::string::npos);
  EXPECT_NE(text.find("fathom_memory_resident_bytes 4321\n"), std::string::npos);
}

}  // namespace fathom::server
