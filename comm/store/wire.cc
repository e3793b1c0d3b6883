#include "comm/store/wire.h"

namespace tandem::comm::store_wire {

void Writer::U32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void Writer::I64(int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(u >> (8 * i)));
}

void Writer::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_.append(s);
}

void Writer::Keys(const std::vector<std::string>& keys) {
  U32(static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) Str(k);
}

std::string Writer::Frame() const {
  Writer w;
  w.U32(static_cast<uint32_t>(out_.size()));
  return w.out_ + out_;
}

uint32_t FrameLength(const char* data) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  }
  return v;
}

std::optional<uint8_t> Reader::U8() {
  if (in_.empty()) return std::nullopt;
  const uint8_t v = static_cast<uint8_t>(in_[0]);
  in_.remove_prefix(1);
  return v;
}

std::optional<uint32_t> Reader::U32() {
  if (in_.size() < 4) return std::nullopt;
  const uint32_t v = FrameLength(in_.data());
  in_.remove_prefix(4);
  return v;
}

std::optional<int64_t> Reader::I64() {
  if (in_.size() < 8) return std::nullopt;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) {
    u |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
  }
  in_.remove_prefix(8);
  return static_cast<int64_t>(u);
}

std::optional<std::string> Reader::Str() {
  std::optional<uint32_t> n = U32();
  if (!n || in_.size() < *n) return std::nullopt;
  std::string s(in_.substr(0, *n));
  in_.remove_prefix(*n);
  return s;
}

std::optional<std::vector<std::string>> Reader::Keys() {
  std::optional<uint32_t> n = U32();
  if (!n) return std::nullopt;
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < *n; ++i) {
    std::optional<std::string> k = Str();
    if (!k) return std::nullopt;
    keys.push_back(std::move(*k));
  }
  return keys;
}

}  // namespace tandem::comm::store_wire
