#include "train/checkpoint/json.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::train::checkpoint {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    absl::StatusOr<JsonValue> v = ParseValue(0);
    if (!v.ok()) return v;
    SkipSpace();
    if (pos_ != text_.size()) return Error("the end of the JSON text");
    return v;
  }

 private:
  absl::Status Error(std::string_view expected) const {
    std::string found =
        pos_ < text_.size()
            ? absl::StrCat("'", std::string(text_.substr(pos_, 1)), "'")
            : std::string("the end");
    return absl::InvalidArgumentError(
        absl::StrCat("JSON: expected ", std::string(expected), " at byte ",
                     pos_, ", found ", found));
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error("at most 64 levels of nesting");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("a value");
    JsonValue v;
    const char c = text_[pos_];
    if (c == '{') {
      v.kind = JsonValue::Kind::kObject;
      ++pos_;
      SkipSpace();
      if (Consume("}")) return v;
      while (true) {
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != '"') {
          return Error("a string key");
        }
        const size_t key_pos = pos_;
        absl::StatusOr<std::string> key = ParseString();
        if (!key.ok()) return key.status();
        SkipSpace();
        if (!Consume(":")) return Error("':'");
        absl::StatusOr<JsonValue> item = ParseValue(depth + 1);
        if (!item.ok()) return item.status();
        if (!v.object.emplace(*key, std::move(*item)).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "JSON: duplicate key ", JsonQuote(*key), " at byte ", key_pos));
        }
        SkipSpace();
        if (Consume("}")) return v;
        if (!Consume(",")) return Error("',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::kArray;
      ++pos_;
      SkipSpace();
      if (Consume("]")) return v;
      while (true) {
        absl::StatusOr<JsonValue> item = ParseValue(depth + 1);
        if (!item.ok()) return item.status();
        v.array.push_back(std::move(*item));
        SkipSpace();
        if (Consume("]")) return v;
        if (!Consume(",")) return Error("',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      absl::StatusOr<std::string> s = ParseString();
      if (!s.ok()) return s.status();
      v.string = std::move(*s);
      return v;
    }
    if (Consume("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
      return v;
    }
    if (Consume("false")) {
      v.kind = JsonValue::Kind::kBool;
      return v;
    }
    if (Consume("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) return ParseInteger();
    return Error("a value");
  }

  absl::StatusOr<JsonValue> ParseInteger() {
    const size_t start = pos_;
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      return Error("a digit");
    }
    // Magnitude accumulated as unsigned so that INT64_MIN parses.
    uint64_t magnitude = 0;
    const uint64_t limit =
        negative ? uint64_t{1} << 63
                 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (limit - digit) / 10) {
        pos_ = start;
        return Error("an integer that fits in 64 bits");
      }
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ < text_.size() &&
        (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      return ParseFraction(start);
    }
    JsonValue v;
    v.kind = JsonValue::Kind::kInteger;
    v.integer = negative ? static_cast<int64_t>(0 - magnitude)
                         : static_cast<int64_t>(magnitude);
    return v;
  }

  // After the integer part of the number that starts at `start`: JSON's
  // fraction ('.' digits) and exponent ('e' sign digits), the whole number
  // read as the nearest double (std::from_chars: no locale).
  absl::StatusOr<JsonValue> ParseFraction(size_t start) {
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        ++pos_;
      }
      return pos_ > from;
    };
    if (Consume(".") && !digits()) return Error("a digit after '.'");
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
        ++pos_;
      }
      if (!digits()) return Error("a digit in the exponent");
    }
    JsonValue v;
    v.kind = JsonValue::Kind::kNumber;
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    const std::from_chars_result r = std::from_chars(first, last, v.number);
    if (r.ec != std::errc() || r.ptr != last) {
      pos_ = start;
      return Error("a number within a double's range");
    }
    return v;
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (pos_ + 4 > text_.size()) return Error("four hex digits");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_];
      uint32_t d;
      if (h >= '0' && h <= '9') {
        d = static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        d = static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        d = static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return Error("a hex digit");
      }
      value = value * 16 + d;
      ++pos_;
    }
    return value;
  }

  static void AppendUtf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // At an opening quote.
  absl::StatusOr<std::string> ParseString() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return Error("a closing '\"'");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("no control character inside a string");
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) return Error("an escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          absl::StatusOr<uint32_t> cp = ParseHex4();
          if (!cp.ok()) return cp.status();
          uint32_t code = *cp;
          if (code >= 0xD800 && code < 0xDC00) {
            if (!Consume("\\u")) return Error("a low surrogate \\u escape");
            absl::StatusOr<uint32_t> low = ParseHex4();
            if (!low.ok()) return low.status();
            if (*low < 0xDC00 || *low >= 0xE000) {
              return Error("a low surrogate");
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (*low - 0xDC00);
          } else if (code >= 0xDC00 && code < 0xE000) {
            return Error("a high surrogate before a low one");
          }
          AppendUtf8(code, out);
          break;
        }
        default:
          --pos_;
          return Error("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(std::string_view text) {
  return Parser(text).ParseDocument();
}

}  // namespace tandem::train::checkpoint
