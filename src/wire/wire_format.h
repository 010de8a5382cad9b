// Constants and enums of the raw bundle format v1.3 (docs/format.md is the spec).
// Every value here is on disk: never renumber, only append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace teller::wire {

inline constexpr std::string_view kFormatName = "teller-bundle";
inline constexpr uint16_t kFormatMajor = 1;  // meta.json "format_version" and chunk headers
// Chunk headers; readers skip newer record kinds and ignore appended fields. 1.1 added
// RangeBatch (kind 16), 1.2 ProcessInfo's rank_source, 1.3 TscRangeBatch (kind 17). A
// chunk is stamped with the lowest minor its records need.
inline constexpr uint16_t kFormatMinor = 3;
inline constexpr uint16_t kMinorRangeBatch = 1;
inline constexpr uint16_t kMinorRankSource = 2;
inline constexpr uint16_t kMinorTscRangeBatch = 3;

// Chunk header: "TLCK", then fields; 32 bytes, little-endian.
inline constexpr uint8_t kChunkMagic[4] = {'T', 'L', 'C', 'K'};
inline constexpr size_t kChunkHeaderBytes = 32;
inline constexpr size_t kRecordHeaderBytes = 8;
// Upper bound a reader accepts for one chunk payload (a writer never comes near it).
inline constexpr uint32_t kMaxChunkPayloadBytes = 256u << 20;

enum class ChunkKind : uint16_t {
  kStrings = 1,  // string definitions (id, bytes)
  kRecords = 2,  // event records
};

enum class ClockDomain : uint8_t {
  kNone = 0,       // record has no timestamp
  kRealtime = 1,   // CLOCK_REALTIME, UTC epoch ns (the trace clock)
  kMonotonic = 2,  // CLOCK_MONOTONIC of the recording host
  kGpu = 3,        // CUPTI timestamps (cuptiGetTimestamp)
};
std::string_view ClockDomainName(ClockDomain clock);

enum class RecordKind : uint16_t {
  kProcessInfo = 1,
  kThreadInfo = 2,
  kRangePush = 3,
  kRangePop = 4,
  kRangeStart = 5,
  kRangeEnd = 6,
  kMark = 7,
  kHostRange = 8,
  kApiCall = 9,
  kKernel = 10,
  kMemcpy = 11,
  kMemset = 12,
  kSync = 13,
  kExternalCorrelation = 14,
  kCollective = 15,
  kRangeBatch = 16,     // since 1.1: push/pop/mark events of one thread, varint entries
  kTscRangeBatch = 17,  // since 1.3: the same with raw TSC stamps and their samples
};
inline constexpr uint16_t kLastKnownRecordKind = 17;
std::string_view RecordKindName(RecordKind kind);

// Layer a host range claims; stable on-disk values, mapped to model::Layer by import.
enum class RangeLayer : uint8_t {
  kUnspecified = 0,
  kStep = 1,
  kFe = 2,
  kBe = 3,
  kRt = 4,
  kDrv = 5,
  kK = 6,
  kMem = 7,
  kComm = 8,
  kSync = 9,
  kOther = 10,
};

enum class ApiKind : uint8_t { kRuntime = 1, kDriver = 2 };

enum class ArgType : uint8_t { kInt = 1, kDouble = 2, kString = 3, kStringList = 4 };

// Memcpy direction, same values as CUpti_ActivityMemcpyKind.
enum class CopyKind : uint8_t {
  kUnknown = 0,
  kHtoD = 1,
  kDtoH = 2,
  kHtoA = 3,
  kAtoH = 4,
  kAtoA = 5,
  kAtoD = 6,
  kDtoA = 7,
  kDtoD = 8,
  kHtoH = 9,
  kPtoP = 10,
};
std::string_view CopyKindName(CopyKind kind);

// Synchronization type, same values as CUpti_ActivitySynchronizationType.
enum class SyncType : uint8_t {
  kUnknown = 0,
  kEventSynchronize = 1,
  kStreamWaitEvent = 2,
  kStreamSynchronize = 3,
  kContextSynchronize = 4,
};
std::string_view SyncTypeName(SyncType type);

// External correlation kind, same values as CUpti_ExternalCorrelationKind.
enum class ExternalKind : uint8_t {
  kInvalid = 0,
  kUnknown = 1,
  kOpenAcc = 2,
  kCustom0 = 3,  // PyTorch / Kineto use this
  kCustom1 = 4,
  kCustom2 = 5,
};

}  // namespace teller::wire
