// Writing and reading little-endian binary files held in memory; a reader checks every
// length against the bytes left and its errors name the file and the offset (teller's
// own binary formats: learn/weights_file.h, store/trace_snapshot.h).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "base/status.h"

namespace teller::base {

static_assert(std::endian::native == std::endian::little,
              "teller's binary files are little-endian");

// A signed value as an unsigned one small when it is near 0 (0, -1, 1, -2 ... as 0, 1, 2,
// 3 ...), for a varint.
inline uint64_t ZigZag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
inline int64_t UnZigZag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

class ByteWriter {
 public:
  template <typename T>
  void Value(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void Bytes(std::string_view bytes) { out_.append(bytes); }
  // An unsigned LEB128 varint: 7 bits a byte, the low ones first, the top bit set on every
  // byte but the last (1 byte below 128, at most 10; ByteReader::Varint).
  void Varint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>(value | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  // A signed value zigzagged, then as a varint (ByteReader::SignedVarint).
  void SignedVarint(int64_t value) { Varint(ZigZag(value)); }
  // A u64 length, then the bytes (ByteReader::String).
  void String(std::string_view text) {
    Value<uint64_t>(text.size());
    Bytes(text);
  }
  // The values as they lie in memory (ByteReader::Array).
  template <typename T>
  void Array(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  // A column: its u64 row count, then its values (ByteReader::Column).
  template <typename T>
  void Column(const std::vector<T>& column) {
    Value<uint64_t>(column.size());
    Array(column);
  }
  // A u64 count, then each string (ByteReader::Strings).
  void Strings(const std::vector<std::string>& texts) {
    Value<uint64_t>(texts.size());
    for (const std::string& text : texts) String(text);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `path` names the source in errors and must outlive the reader.
  ByteReader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  template <typename T>
  Status Value(T* value, std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (left() < sizeof(T)) return Truncated(what);
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return OkStatus();
  }
  // A varint (ByteWriter::Varint); one that runs past the bytes or past 64 bits is an
  // error naming its first byte's offset.
  Status Varint(uint64_t* value, std::string_view what) {
    uint64_t result = 0;
    for (size_t i = 0, shift = 0; shift < 64; ++i, shift += 7) {
      if (i >= left()) return Truncated(what);
      const auto byte = static_cast<uint8_t>(bytes_[at_ + i]);
      if (shift == 63 && byte > 1) return Bad(fmt::format("{}: a varint past 64 bits", what));
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        at_ += i + 1;
        *value = result;
        return OkStatus();
      }
    }
    return Bad(fmt::format("{}: a varint past 64 bits", what));
  }
  Status SignedVarint(int64_t* value, std::string_view what) {
    uint64_t zigzag = 0;
    TELLER_RETURN_IF_ERROR(Varint(&zigzag, what));
    *value = UnZigZag(zigzag);
    return OkStatus();
  }
  // A varint that must fit in T (an unsigned type) and be at most `max`.
  template <typename T>
  Status VarintAtMost(T* value, uint64_t max, std::string_view what) {
    static_assert(std::is_unsigned_v<T>);
    const size_t at = at_;
    uint64_t wide = 0;
    TELLER_RETURN_IF_ERROR(Varint(&wide, what));
    if (wide > max || wide > std::numeric_limits<T>::max()) {
      return DataLoss("{}: offset {}: {} is {}, at most {} expected", path_, at, what, wide,
                      std::min<uint64_t>(max, std::numeric_limits<T>::max()));
    }
    *value = static_cast<T>(wide);
    return OkStatus();
  }
  Status Bytes(size_t count, std::string_view what, std::string_view* out) {
    if (left() < count) return Truncated(what);
    *out = bytes_.substr(at_, count);
    at_ += count;
    return OkStatus();
  }
  // A u64 length, then that many bytes.
  Status String(std::string_view what, std::string_view* text) {
    uint64_t size = 0;
    TELLER_RETURN_IF_ERROR(Value(&size, what));
    return Bytes(size, what, text);
  }
  // `rows` values of T into *out.
  template <typename T>
  Status Array(uint64_t rows, std::string_view what, std::vector<T>* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (rows > left() / sizeof(T)) return Truncated(what);
    out->resize(rows);
    if (rows > 0) std::memcpy(out->data(), bytes_.data() + at_, rows * sizeof(T));
    at_ += rows * sizeof(T);
    return OkStatus();
  }
  template <typename T>
  Status Column(std::string_view what, std::vector<T>* column) {
    uint64_t rows = 0;
    TELLER_RETURN_IF_ERROR(Value(&rows, what));
    return Array(rows, what, column);
  }
  Status Strings(std::string_view what, std::vector<std::string>* texts) {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Value(&count, what));
    if (count > left() / sizeof(uint64_t)) {
      return Bad(fmt::format("{} {}, more than the {} bytes left hold", count, what, left()));
    }
    texts->resize(count);
    for (std::string& text : *texts) {
      std::string_view view;
      TELLER_RETURN_IF_ERROR(String(what, &view));
      text = std::string(view);
    }
    return OkStatus();
  }
  Status Bad(std::string_view what) const {
    return DataLoss("{}: offset {}: {}", path_, at_, what);
  }
  size_t left() const { return bytes_.size() - at_; }

 private:
  Status Truncated(std::string_view what) const {
    return DataLoss("{}: offset {}: the file ends inside {}", path_, at_, what);
  }

  std::string_view bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

// The header of teller's exchange buffers (reconstruct/cross_rank_wire.h): a 4-byte
// magic, then a u32 version.
class WireWriter : public ByteWriter {
 public:
  WireWriter(std::string_view magic, uint32_t version) {
    Bytes(magic);
    Value<uint32_t>(version);
  }
};

// Reads what WireWriter writes; `what` names the buffer in errors and must outlive it.
class WireReader : public ByteReader {
 public:
  WireReader(std::string_view bytes, const std::string& what)
      : ByteReader(bytes, what), what_(what) {}

  Status Header(std::string_view magic, uint32_t version) {
    std::string_view found;
    TELLER_RETURN_IF_ERROR(Bytes(magic.size(), "the magic", &found));
    if (found != magic) return DataLoss("{}: offset 0: expected the magic \"{}\"", what_, magic);
    uint32_t found_version = 0;
    TELLER_RETURN_IF_ERROR(Value(&found_version, "the version"));
    if (found_version != version) {
      return DataLoss("{}: offset {}: expected version {}, found {}", what_, magic.size(), version,
                      found_version);
    }
    return OkStatus();
  }
  Status End() const {
    if (left() != 0) return Bad(fmt::format("expected the end, {} bytes follow", left()));
    return OkStatus();
  }
  // A flag byte: 0 or 1; another value is an error naming its offset.
  Status Flag(bool* flag, std::string_view what) {
    uint8_t value = 0;
    TELLER_RETURN_IF_ERROR(Value(&value, what));
    if (value > 1) return Bad(fmt::format("{} is {}, 0 or 1 expected", what, value));
    *flag = value == 1;
    return OkStatus();
  }
  // An error unless the columns have one length.
  template <typename A, typename B>
  Status SameRows(const std::vector<A>& a, std::string_view a_name, const std::vector<B>& b,
                  std::string_view b_name) const {
    if (a.size() == b.size()) return OkStatus();
    return Bad(fmt::format("{} rows of {} but {} of {}", a.size(), a_name, b.size(), b_name));
  }

 private:
  const std::string& what_;
};

}  // namespace teller::base
