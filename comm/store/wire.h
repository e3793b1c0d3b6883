// The TCP store's wire format (internal to comm/store).
//
// Every message, either way, is a frame: a 4-byte little-endian body length,
// then the body. A request body is one op byte then its fields; a reply body
// is one status byte then the op's result. Fields: a string is a 4-byte
// length then its bytes; an int64 is 8 bytes little-endian; a key list is a
// 4-byte count then that many strings.
//
//   op      request fields             reply on kOk
//   kSet    key, value                 (nothing)
//   kGet    key, timeout_ms            value
//   kAdd    key, delta                 the new value (int64)
//   kWait   keys, timeout_ms           (nothing)
//   kCheck  keys                       one byte, 1 when all exist
// kTimeout (get, wait) carries the key list still missing; kError a message.
#ifndef TANDEM_COMM_STORE_WIRE_H_
#define TANDEM_COMM_STORE_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::comm::store_wire {

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kCheck = 5 };
enum Reply : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

// Frames larger than this are refused (a corrupt or foreign peer).
inline constexpr uint32_t kMaxFrame = 256u << 20;

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void I64(int64_t v);
  void Str(std::string_view s);
  void Keys(const std::vector<std::string>& keys);
  // The body with its length prefix.
  std::string Frame() const;
  const std::string& body() const { return out_; }

 private:
  std::string out_;
};

// Reads fields off a body; every read returns nullopt past the end.
class Reader {
 public:
  explicit Reader(std::string_view body) : in_(body) {}
  std::optional<uint8_t> U8();
  std::optional<uint32_t> U32();
  std::optional<int64_t> I64();
  std::optional<std::string> Str();
  std::optional<std::vector<std::string>> Keys();
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

// The body length of a frame starting at `data`, once 4 bytes are there.
uint32_t FrameLength(const char* data);

}  // namespace tandem::comm::store_wire

#endif  // TANDEM_COMM_STORE_WIRE_H_
