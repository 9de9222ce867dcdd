#include "core/byte_size.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace fathom {
namespace {

TEST(ByteSize, ParsesNumbersAndUnits) {
  EXPECT_EQ(parse_byte_size("1048576", "--x"), 1048576);
  EXPECT_EQ(parse_byte_size("12GiB", "--x"), int64_t(12) << 30);
  EXPECT_EQ(parse_byte_size("12gib", "--x"), int64_t(12) << 30);
  EXPECT_EQ(parse_byte_size("800MB", "--x"), 800'000'000);
  EXPECT_EQ(parse_byte_size("1.5GB", "--x"), 1'500'000'000);
  EXPECT_EQ(parse_byte_size("2G", "--x"), int64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("512 KiB", "--x"), 512 * 1024);
  EXPECT_EQ(parse_byte_size("0.5k", "--x"), 512);
  EXPECT_EQ(parse_byte_size("3b", "--x"), 3);
}

TEST(ByteSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "12XB", "-5GiB", "1.2.3GB", "0", "0.1", "1e3", "5 GiB extra", "99999999999TB"})
    EXPECT_THROW(parse_byte_size(bad, "--memory-budget"), Error) << bad;
  try {
    parse_byte_size("12XB", "--memory-budget");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--memory-budget"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("XB"), std::string::npos);
  }
}

TEST(ByteSize, FormatsForPeople) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(int64_t(3) << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes((int64_t(5) << 30) / 4), "1.25 GiB");
}

}  // namespace
}  // namespace fathom
