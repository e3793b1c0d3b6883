#include "base/json_quote.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem::base {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("layers.0.weight"), "\"layers.0.weight\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\n\r\t"), "\"\\n\\r\\t\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 unchanged
}

}  // namespace
}  // namespace tandem::base
