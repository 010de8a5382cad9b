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

}  // namespace
}  // namespace teller::wire
