#include "train/checkpoint/json.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem::train::checkpoint {
namespace {

TEST(JsonTest, ParsesASafetensorsHeader) {
  absl::StatusOr<JsonValue> v = ParseJson(
      R"( {"__metadata__": {"format": "pt"},
          "a.weight": {"dtype": "F32", "shape": [2, 3],
                       "data_offsets": [0, 24]}, "t": [true, false, null, -9223372036854775808]}   )");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->object.at("__metadata__").object.at("format").string, "pt");
  const JsonValue& w = v->object.at("a.weight");
  EXPECT_EQ(w.object.at("dtype").string, "F32");
  EXPECT_EQ(w.object.at("shape").array[1].integer, 3);
  EXPECT_EQ(w.object.at("data_offsets").array[1].integer, 24);
  EXPECT_TRUE(v->object.at("t").array[0].boolean);
  EXPECT_EQ(v->object.at("t").array[2].kind, JsonValue::Kind::kNull);
  EXPECT_EQ(v->object.at("t").array[3].integer, INT64_MIN);
}

TEST(JsonTest, StringEscapesRoundTrip) {
  const std::string s = "a\"b\\c\n\t\x01/é";
  absl::StatusOr<JsonValue> v = ParseJson(JsonQuote(s));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string, s);
  EXPECT_EQ(ParseJson(R"("\u00e9\ud83d\ude00")")->string,
            "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonTest, ErrorsSayWhatAndWhere) {
  absl::StatusOr<JsonValue> v = ParseJson(R"({"a": 1,})");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(),
            "JSON: expected a string key at byte 8, found '}'");
  EXPECT_NE(ParseJson(R"({"a": 1, "a": 2})")
                .status()
                .message()
                .find("duplicate key \"a\""),
            std::string::npos);
  EXPECT_FALSE(ParseJson("1.").ok());
  EXPECT_FALSE(ParseJson("1e").ok());
  EXPECT_FALSE(ParseJson("1e999").ok());
  EXPECT_FALSE(ParseJson("9223372036854775808").ok());
  EXPECT_FALSE(ParseJson("{} x").ok());
  EXPECT_FALSE(ParseJson("\"abc").ok());
  EXPECT_FALSE(ParseJson(std::string(100, '[')).ok());
}

TEST(JsonTest, NumbersWithAFractionOrAnExponentAreDoubles) {
  absl::StatusOr<JsonValue> v =
      ParseJson(R"({"eps": 1e-05, "p": 0.1, "n": -2.5E+3, "i": 7})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->object.at("eps").kind, JsonValue::Kind::kNumber);
  EXPECT_EQ(v->object.at("eps").number, 1e-5);
  EXPECT_EQ(v->object.at("p").number, 0.1);
  EXPECT_EQ(v->object.at("n").number, -2500.0);
  EXPECT_EQ(v->object.at("i").kind, JsonValue::Kind::kInteger);
  EXPECT_EQ(v->object.at("i").integer, 7);
}

}  // namespace
}  // namespace tandem::train::checkpoint
