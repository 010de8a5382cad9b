// Little-endian encoding of chunk headers and records (byte layout: docs/format.md).
// Shared by BundleWriter and BundleReader; no I/O here.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wire/records.h"
#include "wire/tsc_conversion.h"
#include "wire/wire_format.h"

namespace teller::wire {

// zlib's crc32 of the bytes (IEEE polynomial); PCLMULQDQ folding where the CPU has it.
uint32_t Crc32(std::string_view bytes);
// The same through zlib alone (tests compare the two).
uint32_t Crc32Portable(std::string_view bytes);

struct ChunkHeader {
  uint16_t major = kFormatMajor;
  uint16_t minor = kFormatMinor;
  ChunkKind kind = ChunkKind::kRecords;
  uint16_t header_bytes = kChunkHeaderBytes;
  uint32_t record_count = 0;
  uint32_t payload_bytes = 0;
  uint32_t payload_crc32 = 0;
  uint32_t sequence = 0;  // chunk number within its file, from 0
};

// Appends the 32-byte header (with its own CRC) to out.
void EncodeChunkHeader(const ChunkHeader& header, std::string* out);
enum class HeaderCheck { kOk, kBadMagic, kBadHeaderCrc };
// Decodes 32 bytes at data; the magic and the header CRC are checked.
HeaderCheck DecodeChunkHeader(const uint8_t* data, ChunkHeader* header);

// Gives string ids to the strings a record names. Id 0 is the empty string.
class StringInterner {
 public:
  virtual ~StringInterner() = default;
  virtual uint32_t Intern(std::string_view text) = 0;
};

// Appends one record (8-byte header + payload) to out.
void EncodeRecord(const ProcessInfoRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const ThreadInfoRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const RangePushRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const RangePopRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const RangeStartRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const RangeEndRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const MarkRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const HostRangeRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const ApiCallRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const KernelRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const MemcpyRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const MemsetRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const SyncRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const ExternalCorrelationRecord& r, StringInterner* strings, std::string* out);
void EncodeRecord(const CollectiveRecord& r, StringInterner* strings, std::string* out);

// RangeBatch (kind 16): `tid i64`, then entries up to the payload end. An entry is a
// tag byte (high nibble: 1 push, 2 pop, 3 mark; low nibble: layer), the time since
// the previous entry (the first: since 0) as a zigzag varint, the domain id as a
// varint and, for push and mark, the name id as a varint. Varints are LEB128.
inline constexpr size_t kRangeBatchHeaderBytes = 8;
inline constexpr size_t kMaxRangeBatchEntryBytes = 1 + 10 + 5 + 5;

inline char* PutVarint(char* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<char>(v);
  return out;
}

// Writes one RangeBatch entry at out (room for kMaxRangeBatchEntryBytes) and returns
// its end. kind: kRangePush, kRangePop (name_id unused) or kMark; dt_ns: this entry's
// time minus the previous entry's (its own time for the first); ids from the writer's
// interner.
inline char* EncodeRangeBatchEntry(char* out, RecordKind kind, int64_t dt_ns, RangeLayer layer,
                                   uint32_t domain_id, uint32_t name_id) {
  const uint8_t code = kind == RecordKind::kRangePush ? 1 : kind == RecordKind::kRangePop ? 2 : 3;
  *out++ = static_cast<char>((code << 4) | (static_cast<uint8_t>(layer) & 0x0F));
  out = PutVarint(out, (static_cast<uint64_t>(dt_ns) << 1) ^ static_cast<uint64_t>(dt_ns >> 63));
  out = PutVarint(out, domain_id);
  if (code != 2) out = PutVarint(out, name_id);
  return out;
}

// Appends one RangeBatch record of the encoded entries.
void EncodeRangeBatch(int64_t tid, ClockDomain clock, std::string_view entries, std::string* out);

// TscRangeBatch (kind 17, since minor 3): the same events with raw stamps, so the
// collector's drain neither converts clocks nor encodes varints. Payload: `tid i64,
// floor_ns i64, base_tsc u64, sample_count u32`, sample_count (tsc u64, ns i64) pairs
// (oldest first; none: stamps are already ns), then entries up to the payload end. An
// entry is a tag byte (bits 0-1: 1 push, 2 pop, 3 mark; bits 2-4: dt bytes - 1; bits
// 5-6: name id bytes - 1, 0 for pop; bit 7: a second tag byte follows, bits 0-3 the
// layer, bits 4-6 the domain id's bytes 0-4, bit 7 zero), then dt (ticks since the
// previous entry, the first since base_tsc), the name id (push, mark) and the domain
// id, little-endian in the byte counts the tags give. Times: the samples' conversion
// (tsc_conversion.h), kept non-decreasing from floor_ns on. docs/format.md.
inline constexpr size_t kTscRangeBatchHeaderBytes = 28;
inline constexpr size_t kMaxTscRangeBatchSamples = 64;
inline constexpr size_t kMaxTscRangeBatchEntryBytes = 2 + 8 + 4 + 4;
// EncodeTscRangeBatchEntry may write this many bytes past an entry's end.
inline constexpr size_t kTscRangeBatchEntrySlackBytes = 7;
inline constexpr uint8_t kTscEntryPush = 1, kTscEntryPop = 2, kTscEntryMark = 3;

// Bytes of the shortest little-endian form of v, at least one.
inline unsigned LittleEndianBytes(uint64_t v) { return (71u - std::countl_zero(v | 1)) >> 3; }

// Writes one TscRangeBatch entry at out (room for kMaxTscRangeBatchEntryBytes +
// kTscRangeBatchEntrySlackBytes) and returns its end. kind_code: kTscEntry*; name_id
// unused for pop. The common entry (dt under 2^16 ticks, a name id under 256, no layer
// or domain: the NVTX drain's usual case) takes a short path with fewer operations.
inline char* EncodeTscRangeBatchEntry(char* out, uint8_t kind_code, uint64_t dt_ticks,
                                      uint32_t name_id, uint8_t layer, uint32_t domain_id) {
  static_assert(std::endian::native == std::endian::little);
  const bool pop = kind_code == kTscEntryPop;
  name_id = pop ? 0 : name_id;
  if (__builtin_expect(((dt_ticks >> 16) | (name_id >> 8) | layer | domain_id) == 0, 1)) {
    // The same bytes as below: tag, dt in one or two bytes, the name id's byte.
    const unsigned dt_extra = dt_ticks > 0xFF;
    out[0] = static_cast<char>(kind_code | (dt_extra << 2));
    const uint16_t dt16 = static_cast<uint16_t>(dt_ticks);
    std::memcpy(out + 1, &dt16, 2);
    out[2 + dt_extra] = static_cast<char>(name_id);  // past the end for pop
    return out + 3 + dt_extra - pop;
  }
  const unsigned dt_bytes = LittleEndianBytes(dt_ticks);
  const unsigned name_bytes = pop ? 0 : LittleEndianBytes(name_id);
  const bool extended = (layer | domain_id) != 0;
  out[0] = static_cast<char>(kind_code | ((dt_bytes - 1) << 2) |
                             ((name_bytes - (name_bytes != 0)) << 5) | (extended << 7));
  ++out;
  unsigned domain_bytes = 0;
  if (__builtin_expect(extended, 0)) {
    domain_bytes = domain_id == 0 ? 0 : LittleEndianBytes(domain_id);
    *out++ = static_cast<char>((layer & 0x0F) | (domain_bytes << 4));
  }
  std::memcpy(out, &dt_ticks, 8);
  out += dt_bytes;
  std::memcpy(out, &name_id, 4);
  out += name_bytes;
  if (__builtin_expect(extended, 0)) {
    std::memcpy(out, &domain_id, 4);
    out += domain_bytes;
  }
  return out;
}

struct TscRangeBatchHeader {
  int64_t tid = 0;
  int64_t floor_ns = INT64_MIN;  // entries' times are at least this
  uint64_t base_tsc = 0;         // the first entry's stamp minus its dt
};

// Appends one TscRangeBatch record (at most kMaxTscRangeBatchSamples samples).
void EncodeTscRangeBatch(const TscRangeBatchHeader& header, ClockDomain clock,
                         const TscSample* samples, size_t sample_count, std::string_view entries,
                         std::string* out);

// Appends one string definition (u32 id, u32 length, bytes) to a strings chunk payload.
void EncodeStringDefinition(uint32_t id, std::string_view text, std::string* out);

// Receives decoded records. Views are valid during the call only.
class RecordVisitor {
 public:
  virtual ~RecordVisitor() = default;
  virtual void OnProcessInfo(const ProcessInfoRecord& r) {}
  virtual void OnThreadInfo(const ThreadInfoRecord& r) {}
  virtual void OnRangePush(const RangePushRecord& r) {}
  virtual void OnRangePop(const RangePopRecord& r) {}
  virtual void OnRangeStart(const RangeStartRecord& r) {}
  virtual void OnRangeEnd(const RangeEndRecord& r) {}
  virtual void OnMark(const MarkRecord& r) {}
  virtual void OnHostRange(const HostRangeRecord& r) {}
  virtual void OnApiCall(const ApiCallRecord& r) {}
  virtual void OnKernel(const KernelRecord& r) {}
  virtual void OnMemcpy(const MemcpyRecord& r) {}
  virtual void OnMemset(const MemsetRecord& r) {}
  virtual void OnSync(const SyncRecord& r) {}
  virtual void OnExternalCorrelation(const ExternalCorrelationRecord& r) {}
  virtual void OnCollective(const CollectiveRecord& r) {}
};

// The strings of one event file, by id, as its string chunks define them.
class StringTable {
 public:
  StringTable();
  // Returns false when the id is out of range (a corrupt definition).
  bool Define(uint32_t id, std::string_view text);
  // Returns false (and sets an empty view) when the id was never defined.
  bool Resolve(uint32_t id, std::string_view* text) const;
  void Clear();

 private:
  std::vector<std::string_view> views_;
  std::vector<bool> defined_;
  std::vector<std::unique_ptr<char[]>> blocks_;  // owns the bytes; blocks never move
  size_t block_used_ = 0;
  size_t block_size_ = 0;
};

enum class DecodeResult { kOk, kUnknownKind, kMalformed };

// Reused buffers for the variable parts of records (args, string lists).
struct DecodeScratch {
  std::vector<Arg> args;
  std::vector<std::string_view> list_items;
  std::vector<uint32_t> list_sizes;
  std::vector<TscSample> tsc_samples;
  std::vector<__int128> tsc_rates;
};

// Decodes one record's payload and calls the visitor. unresolved_strings counts
// string ids that had no definition (they read as ""). Fields a newer minor
// version appended after the known ones are ignored.
DecodeResult DecodeRecord(uint16_t kind, ClockDomain clock, std::string_view payload,
                          const StringTable& strings, DecodeScratch* scratch,
                          RecordVisitor* visitor, uint64_t* unresolved_strings);

}  // namespace teller::wire
