// Little-endian encoding of the bootstrap's small messages. The reader treats its input as
// untrusted: every read is bounds-checked and reports failure instead of reading past the end.
#pragma once

#include <cstdint>
#include <string>

namespace ucclzip::transport {

class WireWriter {
 public:
  WireWriter& U8(uint8_t v) { return Fixed(v, 1); }
  WireWriter& U16(uint16_t v) { return Fixed(v, 2); }
  WireWriter& U32(uint32_t v) { return Fixed(v, 4); }
  WireWriter& U64(uint64_t v) { return Fixed(v, 8); }
  WireWriter& String(absl::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  WireWriter& Fixed(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string bytes_;
};

class WireReader {
 public:
  explicit WireReader(absl::string_view bytes) : rest_(bytes) {}
  bool U8(uint8_t* v) { return Fixed(v, 1); }
  bool U16(uint16_t* v) { return Fixed(v, 2); }
  bool U32(uint32_t* v) { return Fixed(v, 4); }
  bool U64(uint64_t* v) { return Fixed(v, 8); }
  // A length-prefixed string of at most `max_bytes` bytes.
  bool String(std::string* s, size_t max_bytes) {
    uint32_t length = 0;
    if (!U32(&length) || length > max_bytes || length > rest_.size()) return false;
    s->assign(rest_.data(), length);
    rest_.remove_prefix(length);
    return true;
  }
  bool at_end() const { return rest_.empty(); }

 private:
  template <typename T>
  bool Fixed(T* v, size_t width) {
    if (rest_.size() < width) return false;
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint64_t{static_cast<uint8_t>(rest_[i])} << (8 * i);
    *v = static_cast<T>(value);
    rest_.remove_prefix(width);
    return true;
  }
  absl::string_view rest_;
};

}  // namespace ucclzip::transport
