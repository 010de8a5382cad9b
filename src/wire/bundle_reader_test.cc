#include "wire/bundle_reader.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/file_util.h"
#include "base/testing.h"
#include "wire/bundle_writer.h"
#include "wire/wire_test_util.h"

namespace teller::wire {
namespace {

using testing::DescribingVisitor;

struct ChunkSpan {
  uint64_t offset;
  uint64_t size;
  ChunkKind kind;
  uint32_t records;
};

// Walks the chunk headers of an intact file.
std::vector<ChunkSpan> Chunks(const std::string& data) {
  std::vector<ChunkSpan> out;
  uint64_t offset = 0;
  while (offset < data.size()) {
    ChunkHeader h;
    EXPECT_EQ(DecodeChunkHeader(reinterpret_cast<const uint8_t*>(data.data()) + offset, &h),
              HeaderCheck::kOk);
    out.push_back({offset, h.header_bytes + uint64_t{h.payload_bytes}, h.kind, h.record_count});
    offset += out.back().size;
  }
  return out;
}

// A single-process bundle with many small chunks; returns its one event file's bytes.
std::string WriteSmallFile(const std::string& name, std::string* path) {
  std::string dir = base::TempDir(name);
  BundleMeta meta;
  meta.host = "h";
  WriterOptions options;
  options.chunk_bytes = 300;
  auto writer = BundleWriter::Create(dir, meta, options);
  EXPECT_TRUE(writer.ok());
  auto w = (*writer)->OpenProcess(ProcessInfoRecord{1, 0, 0, 1, 0, "h", "p", ""});
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < 40; ++i) {
    KernelRecord k;
    k.start_ns = i * 10;
    k.end_ns = i * 10 + 5;
    k.correlation = static_cast<uint64_t>(i + 1);
    std::string name = "kernel_" + std::to_string(i % 7);
    k.name = name;
    EXPECT_TRUE((*w)->Append(k).ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  *path = (*w)->directory() + "/events-000000.bin";
  auto data = base::ReadFile(*path);
  EXPECT_TRUE(data.ok());
  return *data;
}

std::vector<std::string> Parse(std::string_view data, std::vector<ReadIssue>* issues) {
  DescribingVisitor visitor;
  ParseEventFile(data, "f.bin", &visitor, issues);
  return visitor.lines;
}

TEST(BundleReaderTest, TruncatedLastChunkLosesOnlyThatChunk) {
  std::string path;
  std::string data = WriteSmallFile("wire_truncate", &path);
  std::vector<ChunkSpan> chunks = Chunks(data);
  ASSERT_GT(chunks.size(), 6u);
  const ChunkSpan& last = chunks.back();
  ASSERT_EQ(last.kind, ChunkKind::kRecords);

  std::vector<ReadIssue> issues;
  std::vector<std::string> all = Parse(data, &issues);
  ASSERT_TRUE(issues.empty());
  std::vector<std::string> before = Parse(std::string_view(data).substr(0, last.offset), &issues);
  ASSERT_TRUE(issues.empty());
  ASSERT_EQ(before.size() + last.records, all.size());
  ASSERT_TRUE(std::equal(before.begin(), before.end(), all.begin()));

  for (uint64_t cut = last.offset + 1; cut < data.size(); ++cut) {
    issues.clear();
    std::vector<std::string> got = Parse(std::string_view(data).substr(0, cut), &issues);
    ASSERT_EQ(got, before) << "cut at " << cut;
    ASSERT_EQ(issues.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(issues[0].counter, kIssueChunkTruncated);
    EXPECT_EQ(issues[0].file, "f.bin");
    EXPECT_EQ(issues[0].offset, last.offset);
    EXPECT_EQ(issues[0].bytes_lost, cut - last.offset);
    EXPECT_TRUE(issues[0].data_loss);
  }
}

TEST(BundleReaderTest, CutAnywhereNeverCrashesAndKeepsWholeChunks) {
  std::string path;
  std::string data = WriteSmallFile("wire_cut_anywhere", &path);
  std::vector<ChunkSpan> chunks = Chunks(data);
  std::vector<ReadIssue> issues;
  for (uint64_t cut = 0; cut <= data.size(); ++cut) {
    issues.clear();
    std::vector<std::string> got = Parse(std::string_view(data).substr(0, cut), &issues);
    // Records of every chunk that ends at or before the cut are read.
    uint64_t whole = 0;
    bool at_boundary = false;
    for (const ChunkSpan& c : chunks) {
      if (c.offset + c.size <= cut && c.kind == ChunkKind::kRecords) whole += c.records;
      if (c.offset + c.size == cut || cut == 0) at_boundary = true;
    }
    ASSERT_EQ(got.size(), whole) << "cut at " << cut;
    ASSERT_EQ(issues.size(), at_boundary ? 0u : 1u) << "cut at " << cut;
  }
}

TEST(BundleReaderTest, CorruptPayloadSkipsOneChunkAndKeepsTheRest) {
  std::string path;
  std::string data = WriteSmallFile("wire_crc", &path);
  std::vector<ChunkSpan> chunks = Chunks(data);
  std::vector<ReadIssue> issues;
  std::vector<std::string> all = Parse(data, &issues);
  // A records chunk in the middle.
  size_t victim = chunks.size() / 2;
  while (chunks[victim].kind != ChunkKind::kRecords) ++victim;
  std::string bad = data;
  bad[chunks[victim].offset + kChunkHeaderBytes + 3] ^= 0x40;
  std::vector<std::string> got = Parse(bad, &issues);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueChunkCrcMismatch);
  EXPECT_EQ(issues[0].offset, chunks[victim].offset);
  EXPECT_EQ(issues[0].bytes_lost, chunks[victim].size);
  EXPECT_EQ(got.size(), all.size() - chunks[victim].records);
  // Strings defined before the lost chunk still resolve after it.
  EXPECT_EQ(got.back(), all.back());
}

TEST(BundleReaderTest, CorruptHeaderResyncsAtTheNextChunk) {
  std::string path;
  std::string data = WriteSmallFile("wire_header", &path);
  std::vector<ChunkSpan> chunks = Chunks(data);
  std::vector<ReadIssue> issues;
  std::vector<std::string> all = Parse(data, &issues);
  size_t victim = chunks.size() / 2;
  while (chunks[victim].kind != ChunkKind::kRecords) ++victim;
  std::string bad = data;
  bad[chunks[victim].offset + 17] ^= 0x01;  // payload size: the header CRC catches it
  std::vector<std::string> got = Parse(bad, &issues);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueChunkBadHeader);
  EXPECT_EQ(issues[0].offset, chunks[victim].offset);
  EXPECT_EQ(issues[0].bytes_lost, chunks[victim].size);
  EXPECT_EQ(got.size(), all.size() - chunks[victim].records);
}

// A string interner for hand-made chunks.
class SimpleInterner : public StringInterner {
 public:
  std::string definitions;
  uint32_t count = 0;
  uint32_t Intern(std::string_view text) override {
    EncodeStringDefinition(++count, text, &definitions);
    return count;
  }
};

std::string Chunk(ChunkKind kind, uint32_t count, const std::string& payload,
                  uint16_t major = kFormatMajor, uint32_t sequence = 0) {
  ChunkHeader h;
  h.major = major;
  h.kind = kind;
  h.record_count = count;
  h.payload_bytes = static_cast<uint32_t>(payload.size());
  h.payload_crc32 = Crc32(payload);
  h.sequence = sequence;
  std::string out;
  EncodeChunkHeader(h, &out);
  return out + payload;
}

TEST(BundleReaderTest, SkipsAndCountsUnknownRecordKindsAndReadsAppendedFields) {
  SimpleInterner strings;
  std::string records;
  EncodeRecord(MarkRecord{ClockDomain::kRealtime, 1, 10, "d", "first"}, &strings, &records);
  // A record kind from a newer minor version: header + 12 bytes of payload.
  std::string unknown = {static_cast<char>(0xE7), 0x03, 1, 0, 12, 0, 0, 0};
  unknown.append(12, 'x');
  records += unknown;
  // A known kind with fields appended by a newer minor version.
  std::string extended;
  EncodeRecord(MarkRecord{ClockDomain::kRealtime, 2, 20, "d", "second"}, &strings, &extended);
  extended[4] = static_cast<char>(extended[4] + 6);
  extended.append(6, 'z');
  records += extended;
  std::string file = Chunk(ChunkKind::kStrings, strings.count, strings.definitions) +
                     Chunk(ChunkKind::kRecords, 3, records, kFormatMajor, 1) +
                     Chunk(static_cast<ChunkKind>(9), 0, "future", kFormatMajor, 2) +
                     Chunk(ChunkKind::kRecords, 0, "", 2, 3);

  std::vector<ReadIssue> issues;
  std::vector<std::string> got = Parse(file, &issues);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].find("name=first"), std::string::npos);
  EXPECT_NE(got[1].find("name=second"), std::string::npos);
  ASSERT_EQ(issues.size(), 3u);
  EXPECT_EQ(issues[0].counter, kIssueChunkUnknownKind);
  EXPECT_EQ(issues[1].counter, kIssueChunkUnsupportedVersion);
  EXPECT_EQ(issues[2].counter, kIssueRecordUnknownKind);
  EXPECT_EQ(issues[2].count, 1);
  EXPECT_FALSE(issues[2].data_loss);
  // The unknown record starts after the 8-byte header of the first record's chunk.
  uint64_t strings_chunk = kChunkHeaderBytes + strings.definitions.size();
  EXPECT_EQ(issues[2].offset, strings_chunk + kChunkHeaderBytes +
                                  (records.size() - unknown.size() - extended.size()));
}

TEST(BundleReaderTest, CountsMalformedRecordsAndUnresolvedStrings) {
  SimpleInterner strings;
  std::string records;
  EncodeRecord(MarkRecord{ClockDomain::kRealtime, 1, 10, "d", "ok"}, &strings, &records);
  // A kernel record cut to 4 bytes of payload.
  std::string shortened = {static_cast<char>(RecordKind::kKernel), 0, 3, 0, 4, 0, 0, 0, 1, 2, 3, 4};
  records += shortened;
  // A mark naming string ids nobody defined (its strings chunk is not written).
  SimpleInterner lost;
  lost.count = 100;
  EncodeRecord(MarkRecord{ClockDomain::kRealtime, 1, 11, "lost_domain", "lost_name"}, &lost,
               &records);
  std::string file = Chunk(ChunkKind::kStrings, strings.count, strings.definitions) +
                     Chunk(ChunkKind::kRecords, 3, records, kFormatMajor, 1);
  std::vector<ReadIssue> issues;
  std::vector<std::string> got = Parse(file, &issues);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[1].find("domain= name="), std::string::npos);
  ASSERT_EQ(issues.size(), 2u);
  EXPECT_EQ(issues[0].counter, kIssueRecordMalformed);
  EXPECT_EQ(issues[1].counter, kIssueStringUnresolved);
  EXPECT_EQ(issues[1].count, 2);
}

TEST(BundleReaderTest, OpenNamesMissingAndMalformedMetaJson) {
  std::string dir = base::TempDir("wire_no_meta");
  auto missing = BundleReader::Open(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), base::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/meta.json"), std::string::npos);

  ASSERT_TRUE(base::WriteFileAtomic(dir + "/meta.json", "{\"format\": \"teller-bundle\",").ok());
  auto malformed = BundleReader::Open(dir);
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), base::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find(dir + "/meta.json: not valid JSON at offset"),
            std::string::npos)
      << malformed.status().message();

  auto not_dir = BundleReader::Open(dir + "/meta.json");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.status().message().find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace teller::wire

namespace teller::wire {
namespace {

std::string BatchEntry(RecordKind kind, int64_t dt_ns, RangeLayer layer, uint32_t domain,
                       uint32_t name) {
  char entry[kMaxRangeBatchEntryBytes];
  char* end = EncodeRangeBatchEntry(entry, kind, dt_ns, layer, domain, name);
  return std::string(entry, end);
}

TEST(BundleReaderTest, RangeBatchYieldsOneRecordPerEntry) {
  SimpleInterner strings;
  const uint32_t domain = strings.Intern("dom");
  const uint32_t name = strings.Intern("step");
  // Times: -5, then +12 (7), then +2 (9), then a large step back and forward.
  std::string entries =
      BatchEntry(RecordKind::kRangePush, -5, RangeLayer::kStep, domain, name) +
      BatchEntry(RecordKind::kMark, 12, RangeLayer::kUnspecified, 0, name) +
      BatchEntry(RecordKind::kRangePop, 2, RangeLayer::kUnspecified, domain, 0) +
      BatchEntry(RecordKind::kRangePush, INT64_MIN / 2, RangeLayer::kOther, 0, 300) +
      BatchEntry(RecordKind::kRangePop, INT64_MAX / 2, RangeLayer::kUnspecified, 0, 0);
  std::string records;
  EncodeRangeBatch(-3, ClockDomain::kMonotonic, entries, &records);
  std::string second;
  EncodeRangeBatch(4, ClockDomain::kRealtime,
                   BatchEntry(RecordKind::kRangePush, 10, RangeLayer::kFe, 0, name), &second);
  records += second;
  std::string file = Chunk(ChunkKind::kStrings, strings.count, strings.definitions) +
                     Chunk(ChunkKind::kRecords, 2, records, kFormatMajor, 1);
  std::vector<ReadIssue> issues;
  std::vector<std::string> got = Parse(file, &issues);
  const int64_t far = 9 + INT64_MIN / 2;
  std::vector<std::string> want = {
      testing::Describe(
          RangePushRecord{ClockDomain::kMonotonic, -3, -5, RangeLayer::kStep, "dom", "step"}),
      testing::Describe(MarkRecord{ClockDomain::kMonotonic, -3, 7, "", "step"}),
      testing::Describe(RangePopRecord{ClockDomain::kMonotonic, -3, 9, "dom"}),
      testing::Describe(
          RangePushRecord{ClockDomain::kMonotonic, -3, far, RangeLayer::kOther, "", ""}),
      testing::Describe(RangePopRecord{ClockDomain::kMonotonic, -3, far + INT64_MAX / 2, ""}),
      testing::Describe(
          RangePushRecord{ClockDomain::kRealtime, 4, 10, RangeLayer::kFe, "", "step"}),
  };
  EXPECT_EQ(got, want);
  // Only name id 300 was never defined.
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueStringUnresolved);
  EXPECT_EQ(issues[0].count, 1);
}

TEST(BundleReaderTest, RangeBatchCutOrWithUnknownTagIsMalformed) {
  std::string entry = BatchEntry(RecordKind::kRangePush, 1000, RangeLayer::kFe, 0, 0);
  std::string records;
  // Cut inside the varints of its only entry.
  EncodeRangeBatch(1, ClockDomain::kMonotonic, entry.substr(0, 2), &records);
  // An entry tag of no known kind.
  std::string unknown = entry;
  unknown[0] = static_cast<char>(0x70);
  EncodeRangeBatch(1, ClockDomain::kMonotonic, unknown, &records);
  // A payload shorter than its tid.
  std::string short_record = {
      static_cast<char>(RecordKind::kRangeBatch), 0, 2, 0, 4, 0, 0, 0, 1, 2, 3, 4};
  records += short_record;
  std::vector<ReadIssue> issues;
  std::vector<std::string> got =
      Parse(Chunk(ChunkKind::kRecords, 3, records, kFormatMajor, 1), &issues);
  EXPECT_TRUE(got.empty());
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueRecordMalformed);
  EXPECT_EQ(issues[0].count, 3);
}

std::string TscEntry(uint8_t kind_code, uint64_t dt_ticks, uint32_t name, uint8_t layer = 0,
                     uint32_t domain = 0) {
  char entry[kMaxTscRangeBatchEntryBytes + kTscRangeBatchEntrySlackBytes];
  char* end = EncodeTscRangeBatchEntry(entry, kind_code, dt_ticks, name, layer, domain);
  return std::string(entry, end);
}

std::string TscBatch(const TscRangeBatchHeader& header, const std::vector<TscSample>& samples,
                     std::string_view entries) {
  std::string record;
  EncodeTscRangeBatch(header, ClockDomain::kMonotonic, samples.data(), samples.size(), entries,
                      &record);
  return record;
}

TEST(BundleReaderTest, TscRangeBatchConvertsStampsWithItsSamples) {
  SimpleInterner strings;
  const uint32_t domain = strings.Intern("dom");
  const uint32_t name = strings.Intern("step");
  // 2 ticks per ns from tsc 1000 (ns 5000) to 3000 (ns 6000), then 1 tick per ns.
  const std::vector<TscSample> samples = {{1000, 5000}, {3000, 6000}, {4000, 7000}};
  const std::string entries =
      TscEntry(kTscEntryPush, 100, name, 2, domain) +  // tsc 1100: ns 5050
      TscEntry(kTscEntryMark, 900, name) +             // 2000: 5500
      TscEntry(kTscEntryPop, 1500, 0) +                // 3500: 6500
      TscEntry(kTscEntryPush, 1000, 70000) +           // 4500: 7500 (after the last sample)
      TscEntry(kTscEntryPop, uint64_t{1} << 40, 0, 0, domain);  // 3-byte name id above
  const std::string records =
      TscBatch({-3, INT64_MIN, 1000}, samples, entries) +
      // Floor 8000 holds the first time up; without samples stamps are ns already.
      TscBatch({4, 8000, 7000}, {},
               TscEntry(kTscEntryPush, 500, name) + TscEntry(kTscEntryPop, 1000, 0)) +
      // One sample: 1 ns per tick from it.
      TscBatch({5, INT64_MIN, 10}, {{0, 100}}, TscEntry(kTscEntryMark, 5, name));
  const std::string file = Chunk(ChunkKind::kStrings, strings.count, strings.definitions) +
                           Chunk(ChunkKind::kRecords, 3, records, kFormatMajor, 3);
  std::vector<ReadIssue> issues;
  const std::vector<std::string> got = Parse(file, &issues);
  const auto monotonic = ClockDomain::kMonotonic;
  const int64_t far = 7500 + (int64_t{1} << 40);
  const std::vector<std::string> want = {
      testing::Describe(RangePushRecord{monotonic, -3, 5050, RangeLayer::kFe, "dom", "step"}),
      testing::Describe(MarkRecord{monotonic, -3, 5500, "", "step"}),
      testing::Describe(RangePopRecord{monotonic, -3, 6500, ""}),
      testing::Describe(RangePushRecord{monotonic, -3, 7500, RangeLayer::kUnspecified, "", ""}),
      testing::Describe(RangePopRecord{monotonic, -3, far, "dom"}),
      testing::Describe(RangePushRecord{monotonic, 4, 8000, RangeLayer::kUnspecified, "", "step"}),
      testing::Describe(RangePopRecord{monotonic, 4, 8500, ""}),
      testing::Describe(MarkRecord{monotonic, 5, 115, "", "step"}),
  };
  EXPECT_EQ(got, want);
  ASSERT_EQ(issues.size(), 1u);  // name id 70000 was never defined
  EXPECT_EQ(issues[0].counter, kIssueStringUnresolved);
}

TEST(BundleReaderTest, TscRangeBatchEntriesTakeTheShortestForm) {
  EXPECT_EQ(TscEntry(kTscEntryPop, 0, 0).size(), 2u);
  EXPECT_EQ(TscEntry(kTscEntryPush, 255, 255).size(), 3u);
  EXPECT_EQ(TscEntry(kTscEntryPush, 256, 256).size(), 5u);
  EXPECT_EQ(TscEntry(kTscEntryMark, UINT64_MAX, UINT32_MAX, 15, UINT32_MAX).size(),
            kMaxTscRangeBatchEntryBytes);
}

// The entry as docs/format.md spells it, byte by byte, to check the encoder's fast path.
std::string SpelledTscEntry(uint8_t kind_code, uint64_t dt_ticks, uint32_t name, uint8_t layer,
                            uint32_t domain) {
  auto bytes_of = [](uint64_t v) {
    unsigned n = 1;
    while (n < 8 && (v >> (8 * n)) != 0) ++n;
    return n;
  };
  const bool pop = kind_code == kTscEntryPop;
  const bool extended = layer != 0 || domain != 0;
  const unsigned dt_bytes = bytes_of(dt_ticks);
  const unsigned name_bytes = pop ? 0 : bytes_of(name);
  const unsigned domain_bytes = domain == 0 ? 0 : bytes_of(domain);
  std::string out(1, static_cast<char>(kind_code | (dt_bytes - 1) << 2 |
                                       (pop ? 0 : name_bytes - 1) << 5 | extended << 7));
  if (extended) out.push_back(static_cast<char>((layer & 0x0F) | domain_bytes << 4));
  for (unsigned i = 0; i < dt_bytes; ++i) out.push_back(static_cast<char>(dt_ticks >> (8 * i)));
  for (unsigned i = 0; i < name_bytes; ++i) out.push_back(static_cast<char>(name >> (8 * i)));
  for (unsigned i = 0; i < domain_bytes; ++i) out.push_back(static_cast<char>(domain >> (8 * i)));
  return out;
}

TEST(BundleReaderTest, TscRangeBatchEntryFastPathWritesTheSpelledBytes) {
  // Around the fast path's limits: dt 2^16, one-byte name ids, any layer or domain; a
  // pop's name id is ignored, whatever it is.
  const uint64_t dts[] = {0, 1, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFF, uint64_t{1} << 40};
  const uint32_t names[] = {0, 1, 0xFF, 0x100, 0xFFFF, UINT32_MAX};
  for (uint8_t kind : {kTscEntryPush, kTscEntryPop, kTscEntryMark}) {
    for (uint64_t dt : dts) {
      for (uint32_t name : names) {
        for (auto [layer, domain] : {std::pair<uint8_t, uint32_t>{0, 0}, {2, 0}, {0, 7}}) {
          EXPECT_EQ(TscEntry(kind, dt, name, layer, domain),
                    SpelledTscEntry(kind, dt, name, layer, domain))
              << "kind " << int{kind} << " dt " << dt << " name " << name << " layer " << int{layer}
              << " domain " << domain;
        }
      }
    }
  }
}

TEST(BundleReaderTest, TscRangeBatchCutOrMutatedIsMalformedNeverACrash) {
  const std::vector<TscSample> samples = {{1000, 5000}, {3000, 6000}};
  const std::string first = TscEntry(kTscEntryPush, 300, 1, 3, 2);
  const std::string second = TscEntry(kTscEntryPop, 70000, 0);
  const std::string entries = first + second + TscEntry(kTscEntryMark, 1, 1);
  const std::string whole = TscBatch({1, INT64_MIN, 1000}, samples, entries);
  auto parse_record = [](std::string record) {
    // The record header's payload size follows the cut.
    const uint32_t payload = static_cast<uint32_t>(record.size() - kRecordHeaderBytes);
    std::memcpy(record.data() + 4, &payload, 4);
    std::vector<ReadIssue> issues;
    std::vector<std::string> got =
        Parse(Chunk(ChunkKind::kRecords, 1, record, kFormatMajor, 3), &issues);
    std::erase_if(issues, [](const ReadIssue& issue) {
      return issue.counter == kIssueStringUnresolved;  // no strings chunk here
    });
    return std::make_pair(got.size(), issues);
  };
  ASSERT_EQ(parse_record(whole).first, 3u);
  // Every cut: entries before the cut are yielded, the record is malformed unless the
  // cut falls between entries.
  const size_t entries_at = kRecordHeaderBytes + kTscRangeBatchHeaderBytes + 16 * samples.size();
  for (size_t size = kRecordHeaderBytes; size < whole.size(); ++size) {
    auto [records, issues] = parse_record(whole.substr(0, size));
    const bool between_entries = size == entries_at || size == entries_at + first.size() ||
                                 size == entries_at + first.size() + second.size();
    if (between_entries) {
      EXPECT_TRUE(issues.empty()) << size;
    } else {
      ASSERT_EQ(issues.size(), 1u) << size;
      EXPECT_EQ(issues[0].counter, kIssueRecordMalformed) << size;
    }
    EXPECT_LE(records, 3u);
  }
  // Every value of every byte of the record's payload: read or malformed, no crash.
  for (size_t at = kRecordHeaderBytes; at < whole.size(); ++at) {
    for (int value = 0; value < 256; ++value) {
      std::string mutated = whole;
      mutated[at] = static_cast<char>(value);
      (void)parse_record(mutated);
    }
  }
  // Tags no writer makes: kind 0, a pop with name bytes, a second tag byte with bit 7 or
  // a 5-byte domain id; too many samples.
  const std::string tags[] = {std::string(1, '\x00') + "\x01", std::string("\x22\x01"),
                              std::string("\x81\x80\x01\x01"),
                              std::string("\x81\x50\x01\x01\x01\x01\x01\x01\x01")};
  for (const std::string& tag : tags) {
    auto [records, issues] = parse_record(TscBatch({1, 0, 0}, {}, tag));
    EXPECT_EQ(records, 0u);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].counter, kIssueRecordMalformed);
  }
  const std::vector<TscSample> too_many(kMaxTscRangeBatchSamples + 1, TscSample{1, 1});
  auto [records, issues] = parse_record(TscBatch({1, 0, 0}, too_many, entries));
  EXPECT_EQ(records, 0u);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueRecordMalformed);
}

TEST(BundleReaderTest, TscRangeBatchRoundTripsThroughTheWriter) {
  const std::string dir = base::TempDir("tsc_batch_round_trip");
  {
    ProcessInfoRecord info;
    info.pid = 7;
    ProcessWriter writer(dir, info, {});
    const uint32_t name = writer.InternString("forward");
    const std::vector<TscSample> samples = {{0, 1'000'000}, {1'000'000, 2'000'000}};
    const std::string entries = TscEntry(kTscEntryPush, 10, name) + TscEntry(kTscEntryPop, 20, 0);
    ASSERT_TRUE(
        writer.AppendTscRangeBatch({9, INT64_MIN, 0}, samples.data(), samples.size(), entries)
            .ok());
    ASSERT_TRUE(writer.Close().ok());
  }
  std::vector<ReadIssue> issues;
  DescribingVisitor visitor;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ASSERT_TRUE(ReadEventFile(entry.path().string(), &visitor, &issues).ok());
  }
  EXPECT_TRUE(issues.empty());
  const auto monotonic = ClockDomain::kMonotonic;
  ASSERT_EQ(visitor.lines.size(), 3u);  // the process record, then the batch's two
  EXPECT_EQ(visitor.lines[1],
            testing::Describe(
                RangePushRecord{monotonic, 9, 1'000'010, RangeLayer::kUnspecified, "", "forward"}));
  EXPECT_EQ(visitor.lines[2], testing::Describe(RangePopRecord{monotonic, 9, 1'000'030, ""}));
}

}  // namespace
}  // namespace teller::wire
