#include "wire/record_codec.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace teller::wire {
namespace {

void PutU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void PutU16(std::string* out, uint16_t v) {
  char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out->append(b, 2);
}
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}
void SetU32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>(v >> (8 * i));
}
uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t LoadU64(const uint8_t* p) {
  return static_cast<uint64_t>(LoadU32(p)) | (static_cast<uint64_t>(LoadU32(p + 4)) << 32);
}

// Writes one record: header, then fields in on-disk order.
class Encoder {
 public:
  Encoder(RecordKind kind, ClockDomain clock, StringInterner* strings, std::string* out)
      : strings_(strings), out_(out), start_(out->size()) {
    PutU16(out_, static_cast<uint16_t>(kind));
    PutU8(out_, static_cast<uint8_t>(clock));
    PutU8(out_, 0);   // flags, reserved
    PutU32(out_, 0);  // payload size, patched by the destructor
  }
  ~Encoder() {
    SetU32(out_, start_ + 4, static_cast<uint32_t>(out_->size() - start_ - kRecordHeaderBytes));
  }
  Encoder& U8(uint8_t v) {
    PutU8(out_, v);
    return *this;
  }
  Encoder& U16(uint16_t v) {
    PutU16(out_, v);
    return *this;
  }
  Encoder& U32(uint32_t v) {
    PutU32(out_, v);
    return *this;
  }
  Encoder& I32(int32_t v) {
    PutU32(out_, static_cast<uint32_t>(v));
    return *this;
  }
  Encoder& U64(uint64_t v) {
    PutU64(out_, v);
    return *this;
  }
  Encoder& I64(int64_t v) {
    PutU64(out_, static_cast<uint64_t>(v));
    return *this;
  }
  Encoder& F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    PutU64(out_, bits);
    return *this;
  }
  Encoder& Str(std::string_view v) {
    PutU32(out_, v.empty() ? 0 : strings_->Intern(v));
    return *this;
  }
  Encoder& Dim(const Dim3& d) { return I32(d.x).I32(d.y).I32(d.z); }

 private:
  StringInterner* strings_;
  std::string* out_;
  size_t start_;
};

// Reads fields in on-disk order; any read past the end clears ok().
class Decoder {
 public:
  Decoder(std::string_view payload, const StringTable& strings, uint64_t* unresolved)
      : p_(reinterpret_cast<const uint8_t*>(payload.data())),
        end_(p_ + payload.size()),
        strings_(strings),
        unresolved_(unresolved) {}
  bool ok() const { return ok_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  uint8_t U8() { return Need(1) ? *p_++ : 0; }
  uint16_t U16() { return Need(2) ? Advance(LoadU16(p_), 2) : 0; }
  uint32_t U32() { return Need(4) ? Advance(LoadU32(p_), 4) : 0; }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  uint64_t U64() { return Need(8) ? Advance(LoadU64(p_), 8) : 0; }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  double F64() {
    uint64_t bits = U64();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string_view Str() {
    uint32_t id = U32();
    std::string_view text;
    if (ok_ && !strings_.Resolve(id, &text)) ++*unresolved_;
    return text;
  }
  Dim3 Dim() {
    Dim3 d;
    d.x = I32();
    d.y = I32();
    d.z = I32();
    return d;
  }

 private:
  bool Need(size_t n) {
    if (ok_ && static_cast<size_t>(end_ - p_) >= n) return true;
    ok_ = false;
    return false;
  }
  template <typename T>
  T Advance(T value, size_t n) {
    p_ += n;
    return value;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const StringTable& strings_;
  uint64_t* unresolved_;
  bool ok_ = true;
};

constexpr uint32_t kMaxStringId = 1u << 28;

#if defined(__x86_64__)
// CRC-32 (IEEE, reflected) of len bytes (len >= 64, a multiple of 16) by carry-less
// multiplication folding (Intel, "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ"; the constants of Chromium's zlib crc32_simd.c). crc is the running
// register, not inverted.
__attribute__((target("sse4.1,pclmul"))) inline __m128i Load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
// x folded 128 bits forward by the constants k, then xor next.
__attribute__((target("sse4.1,pclmul"))) inline __m128i Fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x11), _mm_clmulepi64_si128(x, k, 0x00)), next);
}

__attribute__((target("sse4.1,pclmul"))) uint32_t Crc32Pclmul(const uint8_t* buf, size_t len,
                                                              uint32_t crc) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x1 = Load128(buf), x2 = Load128(buf + 16), x3 = Load128(buf + 32), x4 = Load128(buf + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64;
  len -= 64;
  while (len >= 64) {
    x1 = Fold(x1, x0, Load128(buf));
    x2 = Fold(x2, x0, Load128(buf + 16));
    x3 = Fold(x3, x0, Load128(buf + 32));
    x4 = Fold(x4, x0, Load128(buf + 48));
    buf += 64;
    len -= 64;
  }
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = Fold(x1, x0, x2);
  x1 = Fold(x1, x0, x3);
  x1 = Fold(x1, x0, x4);
  while (len >= 16) {
    x1 = Fold(x1, x0, Load128(buf));
    buf += 16;
    len -= 16;
  }
  // 128 -> 64 bits.
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x3 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_srli_si128(x1, 8);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, x3);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  // Barrett reduction to 32 bits.
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2 = _mm_and_si128(x1, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
  x2 = _mm_and_si128(x2, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

bool HavePclmul() {
  static const bool have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return have;
}
#endif

uLong ZlibCrc32(uLong crc, const uint8_t* data, size_t left) {
  while (left > 0) {
    uInt step = left > (1u << 30) ? (1u << 30) : static_cast<uInt>(left);
    crc = crc32(crc, data, step);
    data += step;
    left -= step;
  }
  return crc;
}

}  // namespace

uint32_t Crc32Portable(std::string_view bytes) {
  return static_cast<uint32_t>(ZlibCrc32(
      crc32(0L, Z_NULL, 0), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

uint32_t Crc32(std::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t left = bytes.size();
  uLong crc = crc32(0L, Z_NULL, 0);
#if defined(__x86_64__)
  if (left >= 64 && HavePclmul()) {
    const size_t chunk = left & ~size_t{15};
    crc = ~Crc32Pclmul(data, chunk, ~static_cast<uint32_t>(crc)) & 0xFFFFFFFFu;
    data += chunk;
    left -= chunk;
  }
#endif
  return static_cast<uint32_t>(ZlibCrc32(crc, data, left));
}

void EncodeChunkHeader(const ChunkHeader& header, std::string* out) {
  size_t start = out->size();
  out->append(reinterpret_cast<const char*>(kChunkMagic), 4);
  PutU16(out, header.major);
  PutU16(out, header.minor);
  PutU16(out, static_cast<uint16_t>(header.kind));
  PutU16(out, header.header_bytes);
  PutU32(out, header.record_count);
  PutU32(out, header.payload_bytes);
  PutU32(out, header.payload_crc32);
  PutU32(out, header.sequence);
  PutU32(out, Crc32(std::string_view(out->data() + start, 28)));
}

HeaderCheck DecodeChunkHeader(const uint8_t* data, ChunkHeader* header) {
  if (std::memcmp(data, kChunkMagic, 4) != 0) return HeaderCheck::kBadMagic;
  uint32_t crc = Crc32(std::string_view(reinterpret_cast<const char*>(data), 28));
  if (crc != LoadU32(data + 28)) return HeaderCheck::kBadHeaderCrc;
  header->major = LoadU16(data + 4);
  header->minor = LoadU16(data + 6);
  header->kind = static_cast<ChunkKind>(LoadU16(data + 8));
  header->header_bytes = LoadU16(data + 10);
  header->record_count = LoadU32(data + 12);
  header->payload_bytes = LoadU32(data + 16);
  header->payload_crc32 = LoadU32(data + 20);
  header->sequence = LoadU32(data + 24);
  return HeaderCheck::kOk;
}

void EncodeStringDefinition(uint32_t id, std::string_view text, std::string* out) {
  PutU32(out, id);
  PutU32(out, static_cast<uint32_t>(text.size()));
  out->append(text);
}

void EncodeRangeBatch(int64_t tid, ClockDomain clock, std::string_view entries, std::string* out) {
  const size_t start = out->size();
  const uint32_t payload_bytes = static_cast<uint32_t>(kRangeBatchHeaderBytes + entries.size());
  out->resize(start + kRecordHeaderBytes + kRangeBatchHeaderBytes);
  char* p = out->data() + start;
  const uint16_t kind = static_cast<uint16_t>(RecordKind::kRangeBatch);
  std::memcpy(p, &kind, 2);
  p[2] = static_cast<char>(clock);
  p[3] = 0;
  std::memcpy(p + 4, &payload_bytes, 4);
  std::memcpy(p + 8, &tid, 8);
  out->append(entries);
}

void EncodeTscRangeBatch(const TscRangeBatchHeader& header, ClockDomain clock,
                         const TscSample* samples, size_t sample_count, std::string_view entries,
                         std::string* out) {
  const size_t payload_bytes = kTscRangeBatchHeaderBytes + 16 * sample_count + entries.size();
  out->reserve(out->size() + kRecordHeaderBytes + payload_bytes);
  PutU16(out, static_cast<uint16_t>(RecordKind::kTscRangeBatch));
  PutU8(out, static_cast<uint8_t>(clock));
  PutU8(out, 0);
  PutU32(out, static_cast<uint32_t>(payload_bytes));
  PutU64(out, static_cast<uint64_t>(header.tid));
  PutU64(out, static_cast<uint64_t>(header.floor_ns));
  PutU64(out, header.base_tsc);
  PutU32(out, static_cast<uint32_t>(sample_count));
  for (size_t i = 0; i < sample_count; ++i) {
    PutU64(out, samples[i].tsc);
    PutU64(out, static_cast<uint64_t>(samples[i].ns));
  }
  out->append(entries);
}

void EncodeRecord(const ProcessInfoRecord& r, StringInterner* s, std::string* out) {
  const size_t start = out->size();
  Encoder(RecordKind::kProcessInfo, ClockDomain::kNone, s, out)
      .I64(r.pid)
      .I32(r.rank)
      .I32(r.local_rank)
      .I32(r.world_size)
      .I32(r.device)
      .Str(r.host)
      .Str(r.name)
      .Str(r.command);
  // Appended in 1.2, only when known: a record without it is byte for byte a 1.0 one.
  if (!r.rank_source.empty()) PutU32(out, s->Intern(r.rank_source));
  SetU32(out, start + 4, static_cast<uint32_t>(out->size() - start - kRecordHeaderBytes));
}

void EncodeRecord(const ThreadInfoRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kThreadInfo, ClockDomain::kNone, s, out).I64(r.tid).Str(r.name);
}

void EncodeRecord(const RangePushRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kRangePush, r.clock, s, out)
      .I64(r.tid)
      .I64(r.ts_ns)
      .U8(static_cast<uint8_t>(r.layer))
      .Str(r.domain)
      .Str(r.name);
}

void EncodeRecord(const RangePopRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kRangePop, r.clock, s, out).I64(r.tid).I64(r.ts_ns).Str(r.domain);
}

void EncodeRecord(const RangeStartRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kRangeStart, r.clock, s, out)
      .U64(r.range_id)
      .I64(r.tid)
      .I64(r.ts_ns)
      .U8(static_cast<uint8_t>(r.layer))
      .Str(r.domain)
      .Str(r.name);
}

void EncodeRecord(const RangeEndRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kRangeEnd, r.clock, s, out)
      .U64(r.range_id)
      .I64(r.tid)
      .I64(r.ts_ns)
      .Str(r.domain);
}

void EncodeRecord(const MarkRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kMark, r.clock, s, out).I64(r.tid).I64(r.ts_ns).Str(r.domain).Str(r.name);
}

void EncodeRecord(const HostRangeRecord& r, StringInterner* s, std::string* out) {
  Encoder e(RecordKind::kHostRange, r.clock, s, out);
  e.I64(r.tid)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .U64(r.range_id)
      .U8(static_cast<uint8_t>(r.layer))
      .Str(r.name);
  uint16_t count = r.args.size() > UINT16_MAX ? UINT16_MAX : static_cast<uint16_t>(r.args.size());
  e.U16(count);
  for (uint16_t i = 0; i < count; ++i) {
    const Arg& arg = r.args[i];
    e.Str(arg.key).U8(static_cast<uint8_t>(arg.type));
    switch (arg.type) {
      case ArgType::kInt:
        e.I64(arg.int_value);
        break;
      case ArgType::kDouble:
        e.F64(arg.double_value);
        break;
      case ArgType::kString:
        e.Str(arg.string_value);
        break;
      case ArgType::kStringList:
        e.U32(static_cast<uint32_t>(arg.list_value.size()));
        for (std::string_view item : arg.list_value) e.Str(item);
        break;
    }
  }
}

void EncodeRecord(const ApiCallRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kApiCall, r.clock, s, out)
      .I64(r.tid)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .U64(r.correlation)
      .U8(static_cast<uint8_t>(r.api))
      .U32(r.cbid)
      .I32(r.result)
      .Str(r.name);
}

void EncodeRecord(const KernelRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kKernel, r.clock, s, out)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .I32(r.device)
      .U32(r.context)
      .I64(r.stream)
      .U64(r.correlation)
      .Dim(r.grid)
      .Dim(r.block)
      .U32(r.static_smem_bytes)
      .U32(r.dynamic_smem_bytes)
      .U16(r.registers_per_thread)
      .U32(r.graph_id)
      .U64(r.graph_node_id)
      .Str(r.name);
}

void EncodeRecord(const MemcpyRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kMemcpy, r.clock, s, out)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .I32(r.device)
      .U32(r.context)
      .I64(r.stream)
      .U64(r.correlation)
      .U64(r.size_bytes)
      .U8(static_cast<uint8_t>(r.copy_kind))
      .U8(r.src_kind)
      .U8(r.dst_kind)
      .U32(r.graph_id)
      .U64(r.graph_node_id);
}

void EncodeRecord(const MemsetRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kMemset, r.clock, s, out)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .I32(r.device)
      .U32(r.context)
      .I64(r.stream)
      .U64(r.correlation)
      .U64(r.size_bytes)
      .U32(r.value)
      .U32(r.graph_id)
      .U64(r.graph_node_id);
}

void EncodeRecord(const SyncRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kSync, r.clock, s, out)
      .I64(r.tid)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .U8(static_cast<uint8_t>(r.type))
      .I32(r.device)
      .U32(r.context)
      .I64(r.stream)
      .U32(r.event)
      .U64(r.correlation);
}

void EncodeRecord(const ExternalCorrelationRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kExternalCorrelation, ClockDomain::kNone, s, out)
      .U8(static_cast<uint8_t>(r.external_kind))
      .U64(r.external_id)
      .U64(r.correlation);
}

void EncodeRecord(const CollectiveRecord& r, StringInterner* s, std::string* out) {
  Encoder(RecordKind::kCollective, r.clock, s, out)
      .I64(r.tid)
      .I64(r.start_ns)
      .I64(r.end_ns)
      .Str(r.communicator)
      .I64(r.sequence)
      .Str(r.op)
      .I64(r.size_bytes)
      .Str(r.dtype)
      .I32(r.group_size)
      .I32(r.group_rank)
      .U64(r.correlation)
      .U64(r.range_id)
      .I32(r.device)
      .I64(r.stream);
}

StringTable::StringTable() { Clear(); }

void StringTable::Clear() {
  views_.assign(1, std::string_view());
  defined_.assign(1, true);
  blocks_.clear();
  block_used_ = 0;
  block_size_ = 0;
}

bool StringTable::Define(uint32_t id, std::string_view text) {
  if (id == 0 || id >= kMaxStringId) return false;
  if (id >= views_.size()) {
    views_.resize(id + 1);
    defined_.resize(id + 1, false);
  }
  if (blocks_.empty() || block_used_ + text.size() > block_size_) {
    block_size_ = text.size() > (1u << 16) ? text.size() : (1u << 16);
    blocks_.push_back(std::make_unique<char[]>(block_size_));
    block_used_ = 0;
  }
  char* dst = blocks_.back().get() + block_used_;
  if (!text.empty()) std::memcpy(dst, text.data(), text.size());
  block_used_ += text.size();
  views_[id] = std::string_view(dst, text.size());
  defined_[id] = true;
  return true;
}

bool StringTable::Resolve(uint32_t id, std::string_view* text) const {
  if (id < views_.size() && defined_[id]) {
    *text = views_[id];
    return true;
  }
  *text = std::string_view();
  return false;
}

namespace {

DecodeResult Finish(const Decoder& d) {
  return d.ok() ? DecodeResult::kOk : DecodeResult::kMalformed;
}

// One decoder per record kind; each reads its fields in wire order.

DecodeResult DecodeProcessInfo(Decoder& d, RecordVisitor* visitor) {
  ProcessInfoRecord r;
  r.pid = d.I64();
  r.rank = d.I32();
  r.local_rank = d.I32();
  r.world_size = d.I32();
  r.device = d.I32();
  r.host = d.Str();
  r.name = d.Str();
  r.command = d.Str();
  if (d.remaining() >= 4) r.rank_source = d.Str();  // since 1.2
  if (d.ok()) visitor->OnProcessInfo(r);
  return Finish(d);
}

DecodeResult DecodeThreadInfo(Decoder& d, RecordVisitor* visitor) {
  ThreadInfoRecord r;
  r.tid = d.I64();
  r.name = d.Str();
  if (d.ok()) visitor->OnThreadInfo(r);
  return Finish(d);
}

DecodeResult DecodeRangePush(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  RangePushRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.ts_ns = d.I64();
  r.layer = static_cast<RangeLayer>(d.U8());
  r.domain = d.Str();
  r.name = d.Str();
  if (d.ok()) visitor->OnRangePush(r);
  return Finish(d);
}

DecodeResult DecodeRangePop(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  RangePopRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.ts_ns = d.I64();
  r.domain = d.Str();
  if (d.ok()) visitor->OnRangePop(r);
  return Finish(d);
}

DecodeResult DecodeRangeStart(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  RangeStartRecord r;
  r.clock = clock;
  r.range_id = d.U64();
  r.tid = d.I64();
  r.ts_ns = d.I64();
  r.layer = static_cast<RangeLayer>(d.U8());
  r.domain = d.Str();
  r.name = d.Str();
  if (d.ok()) visitor->OnRangeStart(r);
  return Finish(d);
}

DecodeResult DecodeRangeEnd(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  RangeEndRecord r;
  r.clock = clock;
  r.range_id = d.U64();
  r.tid = d.I64();
  r.ts_ns = d.I64();
  r.domain = d.Str();
  if (d.ok()) visitor->OnRangeEnd(r);
  return Finish(d);
}

DecodeResult DecodeMark(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  MarkRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.ts_ns = d.I64();
  r.domain = d.Str();
  r.name = d.Str();
  if (d.ok()) visitor->OnMark(r);
  return Finish(d);
}

DecodeResult DecodeRangeBatch(ClockDomain clock, std::string_view payload,
                              const StringTable& strings, RecordVisitor* visitor,
                              uint64_t* unresolved_strings) {
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  const uint8_t* end = p + payload.size();
  if (payload.size() < kRangeBatchHeaderBytes) return DecodeResult::kMalformed;
  const int64_t tid = static_cast<int64_t>(LoadU64(p));
  p += kRangeBatchHeaderBytes;
  bool ok = true;
  auto varint = [&]() -> uint64_t {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) break;
      const uint8_t byte = *p++;
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return v;
    }
    ok = false;
    return 0;
  };
  auto resolve = [&](uint64_t id) {
    std::string_view text;
    if (id > UINT32_MAX || !strings.Resolve(static_cast<uint32_t>(id), &text)) {
      ++*unresolved_strings;
    }
    return text;
  };
  int64_t ts_ns = 0;
  while (p < end) {
    const uint8_t tag = *p++;
    const uint64_t zigzag = varint();
    ts_ns = static_cast<int64_t>(static_cast<uint64_t>(ts_ns) +
                                 ((zigzag >> 1) ^ (~(zigzag & 1) + 1)));  // wraps, no UB
    const uint64_t domain = varint();
    const uint8_t code = tag >> 4;
    const uint64_t name = code == 2 ? 0 : varint();
    if (!ok || code < 1 || code > 3) return DecodeResult::kMalformed;
    const auto layer = static_cast<RangeLayer>(tag & 0x0F);
    if (code == 1) {
      visitor->OnRangePush(
          RangePushRecord{clock, tid, ts_ns, layer, resolve(domain), resolve(name)});
    } else if (code == 2) {
      visitor->OnRangePop(RangePopRecord{clock, tid, ts_ns, resolve(domain)});
    } else {
      visitor->OnMark(MarkRecord{clock, tid, ts_ns, resolve(domain), resolve(name)});
    }
  }
  return DecodeResult::kOk;
}

// A little-endian number of `bytes` (0-8) bytes at p.
uint64_t LoadBytes(const uint8_t* p, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Converts stamps with the samples of one TscRangeBatch (wire/tsc_conversion.h).
class TscBatchClock {
 public:
  TscBatchClock(const std::vector<TscSample>& samples, std::vector<__int128>* rates)
      : samples_(samples), rates_(*rates) {
    rates_.assign(samples_.size(), 0);
    for (size_t i = 1; i < samples_.size(); ++i) {
      rates_[i] = TscRateQ32(samples_[i - 1], samples_[i]);
    }
  }
  int64_t ToNs(uint64_t tsc) const {
    const size_t count = samples_.size();
    if (count == 0) return static_cast<int64_t>(tsc);  // stamps are ns already
    if (count == 1) {
      return static_cast<int64_t>(static_cast<uint64_t>(samples_[0].ns) + (tsc - samples_[0].tsc));
    }
    const size_t i = TscIntervalEnd(samples_.data(), count, tsc);
    return TscLineNs(samples_[i - 1], rates_[i], tsc);
  }

 private:
  const std::vector<TscSample>& samples_;
  std::vector<__int128>& rates_;
};

DecodeResult DecodeTscRangeBatch(ClockDomain clock, std::string_view payload,
                                 const StringTable& strings, DecodeScratch* scratch,
                                 RecordVisitor* visitor, uint64_t* unresolved_strings) {
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  const uint8_t* const end = p + payload.size();
  if (payload.size() < kTscRangeBatchHeaderBytes) return DecodeResult::kMalformed;
  const auto tid = static_cast<int64_t>(LoadU64(p));
  int64_t ts_ns = static_cast<int64_t>(LoadU64(p + 8));  // the floor, then the last time
  uint64_t tsc = LoadU64(p + 16);
  const uint32_t sample_count = LoadU32(p + 24);
  p += kTscRangeBatchHeaderBytes;
  if (sample_count > kMaxTscRangeBatchSamples ||
      static_cast<size_t>(end - p) < size_t{16} * sample_count) {
    return DecodeResult::kMalformed;
  }
  scratch->tsc_samples.resize(sample_count);
  for (TscSample& sample : scratch->tsc_samples) {
    sample = {LoadU64(p), static_cast<int64_t>(LoadU64(p + 8))};
    p += 16;
  }
  const TscBatchClock batch_clock(scratch->tsc_samples, &scratch->tsc_rates);
  auto resolve = [&](uint64_t id) {
    std::string_view text;
    if (!strings.Resolve(static_cast<uint32_t>(id), &text)) ++*unresolved_strings;
    return text;
  };
  while (p < end) {
    const uint8_t tag = *p++;
    const uint8_t code = tag & 3;
    const unsigned dt_bytes = ((tag >> 2) & 7) + 1;
    const unsigned name_code = (tag >> 5) & 3;
    if (code == 0 || (code == kTscEntryPop && name_code != 0)) return DecodeResult::kMalformed;
    const unsigned name_bytes = code == kTscEntryPop ? 0 : name_code + 1;
    auto layer = RangeLayer::kUnspecified;
    unsigned domain_bytes = 0;
    if (tag & 0x80) {
      if (p == end || (*p & 0x80) || ((*p >> 4) & 7) > 4) return DecodeResult::kMalformed;
      layer = static_cast<RangeLayer>(*p & 0x0F);
      domain_bytes = (*p >> 4) & 7;
      ++p;
    }
    if (static_cast<size_t>(end - p) < dt_bytes + name_bytes + domain_bytes) {
      return DecodeResult::kMalformed;
    }
    tsc += LoadBytes(p, dt_bytes);  // wraps, as the writer's ticks never do
    p += dt_bytes;
    const uint64_t name = LoadBytes(p, name_bytes);
    p += name_bytes;
    const uint64_t domain = LoadBytes(p, domain_bytes);
    p += domain_bytes;
    ts_ns = std::max(ts_ns, batch_clock.ToNs(tsc));
    if (code == kTscEntryPush) {
      visitor->OnRangePush(
          RangePushRecord{clock, tid, ts_ns, layer, resolve(domain), resolve(name)});
    } else if (code == kTscEntryPop) {
      visitor->OnRangePop(RangePopRecord{clock, tid, ts_ns, resolve(domain)});
    } else {
      visitor->OnMark(MarkRecord{clock, tid, ts_ns, resolve(domain), resolve(name)});
    }
  }
  return DecodeResult::kOk;
}

DecodeResult DecodeHostRange(Decoder& d, ClockDomain clock, std::string_view payload,
                             DecodeScratch* scratch, RecordVisitor* visitor) {
  HostRangeRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.range_id = d.U64();
  r.layer = static_cast<RangeLayer>(d.U8());
  r.name = d.Str();
  uint16_t count = d.U16();
  scratch->args.clear();
  scratch->list_items.clear();
  scratch->list_sizes.clear();
  for (uint16_t i = 0; i < count && d.ok(); ++i) {
    Arg arg;
    arg.key = d.Str();
    arg.type = static_cast<ArgType>(d.U8());
    switch (arg.type) {
      case ArgType::kInt:
        arg.int_value = d.I64();
        break;
      case ArgType::kDouble:
        arg.double_value = d.F64();
        break;
      case ArgType::kString:
        arg.string_value = d.Str();
        break;
      case ArgType::kStringList: {
        uint32_t n = d.U32();
        // Each item takes 4 bytes; a larger count is a corrupt record.
        if (n > payload.size() / 4) return DecodeResult::kMalformed;
        for (uint32_t k = 0; k < n && d.ok(); ++k) scratch->list_items.push_back(d.Str());
        scratch->list_sizes.push_back(n);
        break;
      }
      default:
        return DecodeResult::kMalformed;
    }
    scratch->args.push_back(arg);
  }
  if (!d.ok()) return DecodeResult::kMalformed;
  // Point list args into list_items now that it no longer grows.
  size_t item = 0, list = 0;
  for (Arg& arg : scratch->args) {
    if (arg.type != ArgType::kStringList) continue;
    uint32_t n = scratch->list_sizes[list++];
    arg.list_value = std::span<const std::string_view>(scratch->list_items.data() + item, n);
    item += n;
  }
  r.args = scratch->args;
  visitor->OnHostRange(r);
  return DecodeResult::kOk;
}

DecodeResult DecodeApiCall(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  ApiCallRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.correlation = d.U64();
  r.api = static_cast<ApiKind>(d.U8());
  r.cbid = d.U32();
  r.result = d.I32();
  r.name = d.Str();
  if (d.ok()) visitor->OnApiCall(r);
  return Finish(d);
}

DecodeResult DecodeKernel(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  KernelRecord r;
  r.clock = clock;
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.device = d.I32();
  r.context = d.U32();
  r.stream = d.I64();
  r.correlation = d.U64();
  r.grid = d.Dim();
  r.block = d.Dim();
  r.static_smem_bytes = d.U32();
  r.dynamic_smem_bytes = d.U32();
  r.registers_per_thread = d.U16();
  r.graph_id = d.U32();
  r.graph_node_id = d.U64();
  r.name = d.Str();
  if (d.ok()) visitor->OnKernel(r);
  return Finish(d);
}

DecodeResult DecodeMemcpy(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  MemcpyRecord r;
  r.clock = clock;
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.device = d.I32();
  r.context = d.U32();
  r.stream = d.I64();
  r.correlation = d.U64();
  r.size_bytes = d.U64();
  r.copy_kind = static_cast<CopyKind>(d.U8());
  r.src_kind = d.U8();
  r.dst_kind = d.U8();
  r.graph_id = d.U32();
  r.graph_node_id = d.U64();
  if (d.ok()) visitor->OnMemcpy(r);
  return Finish(d);
}

DecodeResult DecodeMemset(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  MemsetRecord r;
  r.clock = clock;
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.device = d.I32();
  r.context = d.U32();
  r.stream = d.I64();
  r.correlation = d.U64();
  r.size_bytes = d.U64();
  r.value = d.U32();
  r.graph_id = d.U32();
  r.graph_node_id = d.U64();
  if (d.ok()) visitor->OnMemset(r);
  return Finish(d);
}

DecodeResult DecodeSync(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  SyncRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.type = static_cast<SyncType>(d.U8());
  r.device = d.I32();
  r.context = d.U32();
  r.stream = d.I64();
  r.event = d.U32();
  r.correlation = d.U64();
  if (d.ok()) visitor->OnSync(r);
  return Finish(d);
}

DecodeResult DecodeExternalCorrelation(Decoder& d, RecordVisitor* visitor) {
  ExternalCorrelationRecord r;
  r.external_kind = static_cast<ExternalKind>(d.U8());
  r.external_id = d.U64();
  r.correlation = d.U64();
  if (d.ok()) visitor->OnExternalCorrelation(r);
  return Finish(d);
}

DecodeResult DecodeCollective(Decoder& d, ClockDomain clock, RecordVisitor* visitor) {
  CollectiveRecord r;
  r.clock = clock;
  r.tid = d.I64();
  r.start_ns = d.I64();
  r.end_ns = d.I64();
  r.communicator = d.Str();
  r.sequence = d.I64();
  r.op = d.Str();
  r.size_bytes = d.I64();
  r.dtype = d.Str();
  r.group_size = d.I32();
  r.group_rank = d.I32();
  r.correlation = d.U64();
  r.range_id = d.U64();
  r.device = d.I32();
  r.stream = d.I64();
  if (d.ok()) visitor->OnCollective(r);
  return Finish(d);
}

}  // namespace

DecodeResult DecodeRecord(uint16_t kind, ClockDomain clock, std::string_view payload,
                          const StringTable& strings, DecodeScratch* scratch,
                          RecordVisitor* visitor, uint64_t* unresolved_strings) {
  Decoder d(payload, strings, unresolved_strings);
  switch (static_cast<RecordKind>(kind)) {
    case RecordKind::kProcessInfo:
      return DecodeProcessInfo(d, visitor);
    case RecordKind::kThreadInfo:
      return DecodeThreadInfo(d, visitor);
    case RecordKind::kRangePush:
      return DecodeRangePush(d, clock, visitor);
    case RecordKind::kRangePop:
      return DecodeRangePop(d, clock, visitor);
    case RecordKind::kRangeStart:
      return DecodeRangeStart(d, clock, visitor);
    case RecordKind::kRangeEnd:
      return DecodeRangeEnd(d, clock, visitor);
    case RecordKind::kMark:
      return DecodeMark(d, clock, visitor);
    case RecordKind::kRangeBatch:
      return DecodeRangeBatch(clock, payload, strings, visitor, unresolved_strings);
    case RecordKind::kTscRangeBatch:
      return DecodeTscRangeBatch(clock, payload, strings, scratch, visitor, unresolved_strings);
    case RecordKind::kHostRange:
      return DecodeHostRange(d, clock, payload, scratch, visitor);
    case RecordKind::kApiCall:
      return DecodeApiCall(d, clock, visitor);
    case RecordKind::kKernel:
      return DecodeKernel(d, clock, visitor);
    case RecordKind::kMemcpy:
      return DecodeMemcpy(d, clock, visitor);
    case RecordKind::kMemset:
      return DecodeMemset(d, clock, visitor);
    case RecordKind::kSync:
      return DecodeSync(d, clock, visitor);
    case RecordKind::kExternalCorrelation:
      return DecodeExternalCorrelation(d, visitor);
    case RecordKind::kCollective:
      return DecodeCollective(d, clock, visitor);
  }
  return DecodeResult::kUnknownKind;
}

std::string_view ClockDomainName(ClockDomain clock) {
  switch (clock) {
    case ClockDomain::kNone:
      return "none";
    case ClockDomain::kRealtime:
      return "realtime";
    case ClockDomain::kMonotonic:
      return "monotonic";
    case ClockDomain::kGpu:
      return "gpu";
  }
  return "unknown";
}

std::string_view RecordKindName(RecordKind kind) {
  switch (kind) {
    case RecordKind::kProcessInfo:
      return "process_info";
    case RecordKind::kThreadInfo:
      return "thread_info";
    case RecordKind::kRangePush:
      return "range_push";
    case RecordKind::kRangePop:
      return "range_pop";
    case RecordKind::kRangeStart:
      return "range_start";
    case RecordKind::kRangeEnd:
      return "range_end";
    case RecordKind::kMark:
      return "mark";
    case RecordKind::kHostRange:
      return "host_range";
    case RecordKind::kApiCall:
      return "api_call";
    case RecordKind::kKernel:
      return "kernel";
    case RecordKind::kMemcpy:
      return "memcpy";
    case RecordKind::kMemset:
      return "memset";
    case RecordKind::kSync:
      return "sync";
    case RecordKind::kExternalCorrelation:
      return "external_correlation";
    case RecordKind::kCollective:
      return "collective";
    case RecordKind::kRangeBatch:
      return "range_batch";
    case RecordKind::kTscRangeBatch:
      return "tsc_range_batch";
  }
  return "unknown";
}

std::string_view CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kUnknown:
      return "Unknown";
    case CopyKind::kHtoD:
      return "HtoD";
    case CopyKind::kDtoH:
      return "DtoH";
    case CopyKind::kHtoA:
      return "HtoA";
    case CopyKind::kAtoH:
      return "AtoH";
    case CopyKind::kAtoA:
      return "AtoA";
    case CopyKind::kAtoD:
      return "AtoD";
    case CopyKind::kDtoA:
      return "DtoA";
    case CopyKind::kDtoD:
      return "DtoD";
    case CopyKind::kHtoH:
      return "HtoH";
    case CopyKind::kPtoP:
      return "PtoP";
  }
  return "Unknown";
}

std::string_view SyncTypeName(SyncType type) {
  switch (type) {
    case SyncType::kUnknown:
      return "Unknown Sync";
    case SyncType::kEventSynchronize:
      return "Event Sync";
    case SyncType::kStreamWaitEvent:
      return "Stream Wait Event";
    case SyncType::kStreamSynchronize:
      return "Stream Sync";
    case SyncType::kContextSynchronize:
      return "Context Sync";
  }
  return "Unknown Sync";
}

}  // namespace teller::wire
