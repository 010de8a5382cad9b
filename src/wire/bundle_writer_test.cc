#include "wire/bundle_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <limits>
#include <random>
#include <thread>

#include "base/file_util.h"
#include "base/testing.h"
#include "wire/bundle_reader.h"
#include "wire/wire_test_util.h"

namespace teller::wire {
namespace {

using testing::Describe;
using testing::DescribingVisitor;

// Reads every record of the bundle's only process.
std::vector<std::string> ReadBack(const std::string& dir, std::vector<ReadIssue>* issues) {
  auto reader = BundleReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return {};
  EXPECT_EQ(reader->processes().size(), 1u);
  DescribingVisitor visitor;
  auto stats = reader->ReadProcess(0, &visitor, issues);
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return visitor.lines;
}

BundleMeta SmallMeta() {
  BundleMeta meta;
  meta.tool_version = "test";
  meta.host = "h";
  meta.clock_pairs = {{1000, 10, std::nullopt}};
  return meta;
}

TEST(BundleWriterTest, RoundTripsEveryRecordKind) {
  std::string dir = base::TempDir("wire_round_trip");
  auto writer = BundleWriter::Create(dir, SmallMeta());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  std::vector<std::string> expected;

  ProcessInfoRecord info{4242, 3, 1, 8, 1, "gpu-node-7", "python3", "python3 serve.py --tp 8"};
  auto process = (*writer)->OpenProcess(info);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ProcessWriter* w = *process;
  expected.push_back(Describe(info));

  auto add = [&](const auto& record) {
    ASSERT_TRUE(w->Append(record).ok());
    expected.push_back(Describe(record));
  };
  add(ThreadInfoRecord{-7, "worker \xC3\xA9 \"quoted\""});
  add(RangePushRecord{ClockDomain::kMonotonic, 11, -5, RangeLayer::kBe, "torch", "aten::mm"});
  add(RangePopRecord{ClockDomain::kMonotonic, 11, 99, "torch"});
  add(RangeStartRecord{ClockDomain::kRealtime, std::numeric_limits<uint64_t>::max(), 12,
                       std::numeric_limits<int64_t>::min(), RangeLayer::kFe, "", "load"});
  add(RangeEndRecord{ClockDomain::kRealtime, std::numeric_limits<uint64_t>::max(), 13,
                     std::numeric_limits<int64_t>::max(), ""});
  add(MarkRecord{ClockDomain::kGpu, 11, 5, "vllm", "sampled"});
  std::array<std::string_view, 3> requests = {"cmpl-1", "", "cmpl-3"};
  std::array<Arg, 5> args = {Arg::Int("step", 7), Arg::String("phase", "prefill"),
                             Arg::StringList("requests", requests), Arg::Double("ratio", -0.125),
                             Arg::StringList("empty", {})};
  HostRangeRecord step{ClockDomain::kMonotonic, 11,  100, 200, 1, RangeLayer::kStep,
                       "execute_model",         args};
  add(step);
  add(HostRangeRecord{
      ClockDomain::kMonotonic, 11, 101, 150, 0, RangeLayer::kUnspecified, "forward", {}});
  add(ApiCallRecord{ClockDomain::kGpu, 11, 1, 2, 77, ApiKind::kDriver, 13, 700, "cuLaunchKernel"});
  KernelRecord kernel;
  kernel.start_ns = 3;
  kernel.end_ns = 4;
  kernel.device = 2;
  kernel.context = 9;
  kernel.stream = 21;
  kernel.correlation = 77;
  kernel.grid = {1, 2, 3};
  kernel.block = {4, 5, 6};
  kernel.static_smem_bytes = 1024;
  kernel.dynamic_smem_bytes = 2048;
  kernel.registers_per_thread = 255;
  kernel.graph_id = 5;
  kernel.graph_node_id = 1ull << 40;
  kernel.name = "gemm";
  add(kernel);
  add(MemcpyRecord{ClockDomain::kGpu, 5, 6, 2, 9, 21, 78, 1ull << 33, CopyKind::kDtoH, 3, 1, 0, 0});
  add(MemsetRecord{ClockDomain::kGpu, 7, 8, 2, 9, 21, 79, 64, 0xAB, 1, 2});
  add(SyncRecord{ClockDomain::kGpu, -1, 9, 10, SyncType::kEventSynchronize, 2, 9, -1, 4, 80});
  add(ExternalCorrelationRecord{ExternalKind::kCustom0, 123456, 77});
  add(CollectiveRecord{ClockDomain::kGpu, 11, 0, 0, "comm-0", 17, "all_gather", 1 << 20, "bfloat16",
                       8, 3, 81, 1, 2, 21});
  ASSERT_TRUE((*writer)->Close().ok());

  std::vector<ReadIssue> issues;
  EXPECT_EQ(ReadBack(dir, &issues), expected);
  EXPECT_TRUE(issues.empty()) << issues[0].ToString();
}

// Random records of every kind, with chunk, file and string-index limits small
// enough that chunks, file rollover and index resets all happen.
class RandomRecords {
 public:
  explicit RandomRecords(uint64_t seed) : rng_(seed) {
    for (int i = 0; i < 40; ++i) {
      std::string s;
      int len = static_cast<int>(Uniform(0, 24));
      for (int k = 0; k < len; ++k) s.push_back(static_cast<char>(Uniform(1, 255)));
      pool_.push_back(s);
    }
    pool_.push_back("");
  }

  // Appends one random record to w and its description to expected.
  void AppendOne(ProcessWriter* w, std::vector<std::string>* expected) {
    auto add = [&](const auto& r) {
      ASSERT_TRUE(w->Append(r).ok());
      expected->push_back(Describe(r));
    };
    switch (Uniform(2, kLastKnownRecordKind)) {
      case 2:
        add(ThreadInfoRecord{I64(), Str()});
        break;
      case 3:
        add(RangePushRecord{Clock(), I64(), I64(), Layer(), Str(), Str()});
        break;
      case 4:
        add(RangePopRecord{Clock(), I64(), I64(), Str()});
        break;
      case 5:
        add(RangeStartRecord{Clock(), U64(), I64(), I64(), Layer(), Str(), Str()});
        break;
      case 6:
        add(RangeEndRecord{Clock(), U64(), I64(), I64(), Str()});
        break;
      case 7:
        add(MarkRecord{Clock(), I64(), I64(), Str(), Str()});
        break;
      case 8: {
        std::vector<Arg> args(Uniform(0, 4));
        std::deque<std::vector<std::string_view>> lists;
        for (Arg& a : args) {
          a.key = Str();
          a.type = static_cast<ArgType>(Uniform(1, 4));
          a.int_value = I64();
          a.double_value = static_cast<double>(I64()) / 3.0;
          a.string_value = Str();
          lists.emplace_back();
          for (uint64_t k = Uniform(0, 5); k > 0; --k) lists.back().push_back(Str());
          a.list_value = lists.back();
          // Only the field of its type travels; clear the others for the comparison.
          if (a.type != ArgType::kInt) a.int_value = 0;
          if (a.type != ArgType::kDouble) a.double_value = 0;
          if (a.type != ArgType::kString) a.string_value = {};
          if (a.type != ArgType::kStringList) a.list_value = {};
        }
        add(HostRangeRecord{Clock(), I64(), I64(), I64(), U64(), Layer(), Str(), args});
        break;
      }
      case 9:
        add(ApiCallRecord{Clock(), I64(), I64(), I64(), U64(), static_cast<ApiKind>(Uniform(1, 2)),
                          U32(), I32(), Str()});
        break;
      case 10: {
        KernelRecord k{Clock(),
                       I64(),
                       I64(),
                       I32(),
                       U32(),
                       I64(),
                       U64(),
                       {I32(), I32(), I32()},
                       {I32(), I32(), I32()},
                       U32(),
                       U32(),
                       static_cast<uint16_t>(U32()),
                       U32(),
                       U64(),
                       Str()};
        add(k);
        break;
      }
      case 11:
        add(MemcpyRecord{Clock(), I64(), I64(), I32(), U32(), I64(), U64(), U64(),
                         static_cast<CopyKind>(Uniform(0, 10)), static_cast<uint8_t>(U32()),
                         static_cast<uint8_t>(U32()), U32(), U64()});
        break;
      case 12:
        add(MemsetRecord{Clock(), I64(), I64(), I32(), U32(), I64(), U64(), U64(), U32(), U32(),
                         U64()});
        break;
      case 13:
        add(SyncRecord{Clock(), I64(), I64(), I64(), static_cast<SyncType>(Uniform(0, 4)), I32(),
                       U32(), I64(), U32(), U64()});
        break;
      case 14:
        add(ExternalCorrelationRecord{static_cast<ExternalKind>(Uniform(0, 5)), U64(), U64()});
        break;
      case 16: {  // a RangeBatch: pushes, pops and marks of one thread
        const int64_t tid = I64();
        const ClockDomain clock = Clock();
        std::string entries;
        int64_t previous = 0;
        for (uint64_t k = Uniform(1, 6); k > 0; --k) {
          const int64_t ts = I64() >> Uniform(0, 62);  // small and large steps, both ways
          const RangeLayer layer = Layer();
          const std::string_view domain = Str(), name = Str();
          char entry[kMaxRangeBatchEntryBytes];
          char* end = entry;
          const int64_t dt =
              static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(previous));
          previous = ts;
          switch (Uniform(0, 2)) {
            case 0:
              end = EncodeRangeBatchEntry(entry, RecordKind::kRangePush, dt, layer,
                                          w->InternString(domain), w->InternString(name));
              expected->push_back(Describe(RangePushRecord{clock, tid, ts, layer, domain, name}));
              break;
            case 1:
              end = EncodeRangeBatchEntry(entry, RecordKind::kRangePop, dt,
                                          RangeLayer::kUnspecified, w->InternString(domain), 0);
              expected->push_back(Describe(RangePopRecord{clock, tid, ts, domain}));
              break;
            default:
              end = EncodeRangeBatchEntry(entry, RecordKind::kMark, dt, RangeLayer::kUnspecified,
                                          w->InternString(domain), w->InternString(name));
              expected->push_back(Describe(MarkRecord{clock, tid, ts, domain, name}));
          }
          entries.append(entry, end);
        }
        ASSERT_TRUE(w->AppendRangeBatch(tid, clock, entries).ok());
        break;
      }
      default:
        add(CollectiveRecord{Clock(), I64(), I64(), I64(), Str(), I64(), Str(), I64(), Str(), I32(),
                             I32(), U64(), U64(), I32(), I64()});
    }
  }

  uint64_t Uniform(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }

 private:
  uint64_t U64() { return rng_(); }
  int64_t I64() { return static_cast<int64_t>(rng_()); }
  uint32_t U32() { return static_cast<uint32_t>(rng_()); }
  int32_t I32() { return static_cast<int32_t>(rng_()); }
  ClockDomain Clock() { return static_cast<ClockDomain>(Uniform(1, 3)); }
  RangeLayer Layer() { return static_cast<RangeLayer>(Uniform(0, 10)); }
  std::string_view Str() { return pool_[Uniform(0, pool_.size() - 1)]; }

  std::mt19937_64 rng_;
  std::deque<std::string> pool_;
};

TEST(BundleWriterTest, RandomRecordsRoundTrip) {
  uint64_t files = 0, resets = 0, chunks = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::string dir = base::TempDir("wire_random_" + std::to_string(seed));
    RandomRecords random(seed);
    WriterOptions options;
    options.chunk_bytes = random.Uniform(256, 4096);
    options.max_file_bytes = random.Uniform(4096, 64 * 1024);
    options.max_string_index_bytes = random.Uniform(200, 4000);
    auto writer = BundleWriter::Create(dir, SmallMeta(), options);
    ASSERT_TRUE(writer.ok());
    ProcessInfoRecord info{static_cast<int64_t>(seed), 0, 0, 1, 0, "h", "p", ""};
    auto process = (*writer)->OpenProcess(info);
    ASSERT_TRUE(process.ok());
    std::vector<std::string> expected = {Describe(info)};
    for (int i = 0; i < 1500; ++i) random.AppendOne(*process, &expected);
    ASSERT_TRUE((*writer)->Close().ok());
    files += (*process)->counters().files;
    resets += (*process)->counters().string_index_resets;
    chunks += (*process)->counters().chunks;
    EXPECT_EQ((*process)->counters().records, 1501u);  // a RangeBatch is one record

    std::vector<ReadIssue> issues;
    std::vector<std::string> got = ReadBack(dir, &issues);
    ASSERT_EQ(got.size(), expected.size()) << "seed " << seed;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected[i]) << "seed " << seed << " record " << i;
    }
    EXPECT_TRUE(issues.empty()) << issues[0].ToString();
  }
  // The limits were small enough to exercise every path.
  EXPECT_GT(files, 6u);
  EXPECT_GT(resets, 0u);
  EXPECT_GT(chunks, 100u);
}

TEST(BundleWriterTest, FlushMakesRecordsDurableBeforeClose) {
  std::string dir = base::TempDir("wire_flush");
  auto writer = BundleWriter::Create(dir, SmallMeta());
  ASSERT_TRUE(writer.ok());
  auto process = (*writer)->OpenProcess(ProcessInfoRecord{1, 0, 0, 1, 0, "h", "p", ""});
  ASSERT_TRUE(process.ok());
  ASSERT_TRUE((*process)->Append(MarkRecord{ClockDomain::kRealtime, 1, 5, "d", "flushed"}).ok());
  ASSERT_TRUE((*writer)->Flush().ok());
  ASSERT_TRUE((*process)->Append(MarkRecord{ClockDomain::kRealtime, 1, 6, "d", "buffered"}).ok());
  // Read while the writer is still open, as after a crash: the flushed mark is there,
  // the buffered one is not.
  std::vector<ReadIssue> issues;
  std::vector<std::string> got = ReadBack(dir, &issues);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[1].find("name=flushed"), std::string::npos);
  EXPECT_TRUE(issues.empty());
}

size_t CountContaining(const std::vector<std::string>& lines, std::string_view text) {
  return std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.find(text) != std::string::npos;
  });
}

size_t EventFiles(const std::string& dir) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    files += entry.path().extension() == ".bin";
  }
  return files;
}

TEST(BundleWriterTest, RingKeepsItsLastSecondsAndEachSegmentReadsAlone) {
  std::string dir = base::TempDir("wire_ring_time");
  WriterOptions options;
  options.ring_ns = 200'000'000;
  auto writer = BundleWriter::Create(dir, SmallMeta(), options);
  ASSERT_TRUE(writer.ok());
  ProcessWriter* w = nullptr;
  {
    // The caller's strings end here; every segment repeats the writer's own copies.
    const std::string name = "engine-with-a-name-longer-than-small-strings-" + std::to_string(1);
    auto process = (*writer)->OpenProcess(ProcessInfoRecord{1, 0, 0, 1, 0, "h", name, ""});
    ASSERT_TRUE(process.ok());
    w = *process;
  }
  std::string overwrite(256, 'x');  // likely reuses the freed block
  ASSERT_TRUE(w->Append(ThreadInfoRecord{7, "scheduler"}).ok());
  ASSERT_TRUE(w->Append(MarkRecord{ClockDomain::kMonotonic, 7, 1, "d", "old"}).ok());
  ASSERT_TRUE(w->Flush().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(w->Flush().ok());  // a new segment: the old one is a quarter ring old
  ASSERT_TRUE(w->Append(MarkRecord{ClockDomain::kMonotonic, 7, 2, "d", "new"}).ok());
  ASSERT_TRUE(w->Flush().ok());
  EXPECT_EQ(EventFiles(dir), 0u);  // nothing on disk before Persist
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  ASSERT_TRUE(w->Flush().ok());  // the segment after "old" is a ring old: "old" goes
  EXPECT_GE(w->counters().ring_segments_dropped, 1u);
  ASSERT_TRUE(w->Persist().ok());
  EXPECT_EQ(w->ring_bytes(), 0u);

  std::vector<ReadIssue> issues;
  std::vector<std::string> got = ReadBack(dir, &issues);
  EXPECT_TRUE(issues.empty());
  EXPECT_EQ(CountContaining(got, "name=old"), 0u);
  EXPECT_EQ(CountContaining(got, "name=new"), 1u);
  // Every file names its process and threads again: it reads without the others.
  const size_t files = EventFiles(dir);
  EXPECT_GE(files, 2u);
  EXPECT_EQ(CountContaining(got, "process pid="), files);
  EXPECT_EQ(CountContaining(got, "name=engine-with-a-name-longer-than-small-strings-1 "), files);
  EXPECT_EQ(CountContaining(got, "name=scheduler"), files);
}

TEST(BundleWriterTest, RingStaysWithinItsBytes) {
  std::string dir = base::TempDir("wire_ring_bytes");
  WriterOptions options;
  options.ring_ns = 3600'000'000'000;
  options.ring_max_bytes = 8 << 10;
  options.chunk_bytes = 512;
  auto writer = BundleWriter::Create(dir, SmallMeta(), options);
  ASSERT_TRUE(writer.ok());
  auto process = (*writer)->OpenProcess(ProcessInfoRecord{1, 0, 0, 1, 0, "h", "engine", ""});
  ASSERT_TRUE(process.ok());
  ProcessWriter* w = *process;
  size_t most_bytes = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "mark-" + std::to_string(i);
    ASSERT_TRUE(w->Append(MarkRecord{ClockDomain::kMonotonic, 7, i, "d", name}).ok());
    if (i % 10 == 9) {
      ASSERT_TRUE(w->Flush().ok());
    }
    most_bytes = std::max(most_bytes, w->ring_bytes());
  }
  // The cap plus the quarter segment that may be filling when the oldest goes.
  EXPECT_LE(most_bytes, options.ring_max_bytes + options.ring_max_bytes / 4 + 2 * 512);
  ASSERT_TRUE(w->Persist().ok());
  std::vector<ReadIssue> issues;
  std::vector<std::string> got = ReadBack(dir, &issues);
  auto has_mark = [&](const std::string& name) {
    return std::any_of(got.begin(), got.end(), [&](const std::string& line) {
      return line.size() >= name.size() + 5 &&
             line.compare(line.size() - name.size() - 5, std::string::npos, "name=" + name) == 0;
    });
  };
  EXPECT_FALSE(has_mark("mark-0"));  // the oldest went
  EXPECT_TRUE(has_mark("mark-1999"));
  EXPECT_LT(CountContaining(got, "mark clock="), 2000u);
}

TEST(BundleWriterTest, RefusesToOverwriteABundle) {
  std::string dir = base::TempDir("wire_twice");
  ASSERT_TRUE(BundleWriter::Create(dir, SmallMeta()).ok());
  auto again = BundleWriter::Create(dir, SmallMeta());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("meta.json"), std::string::npos);
}

TEST(BundleWriterTest, ProcessFoldersAreNamedAfterHostAndPid) {
  std::string dir = base::TempDir("wire_names");
  auto writer = BundleWriter::Create(dir, SmallMeta());
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->OpenProcess(ProcessInfoRecord{77, 0, 0, 1, 0, "a-b/c", "p", ""}).ok());
  ASSERT_TRUE((*writer)->OpenProcess(ProcessInfoRecord{77, 0, 0, 1, 0, "a-b/c", "p", ""}).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto reader = BundleReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  ASSERT_EQ(reader->processes().size(), 2u);
  EXPECT_EQ(reader->processes()[0].name, "proc-a-b_c-77");
  EXPECT_EQ(reader->processes()[1].name, "proc-a-b_c-77.2");
  for (const ProcessDirectory& p : reader->processes()) {
    EXPECT_EQ(p.host, "a-b_c");
    EXPECT_EQ(p.pid, 77);
  }
}

TEST(LogWriterTest, LinesRoundTripThroughTheParser) {
  std::string dir = base::TempDir("wire_logs");
  auto writer = BundleWriter::Create(dir, SmallMeta());
  ASSERT_TRUE(writer.ok());
  auto log = (*writer)->OpenLog("service");
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(
      (*log)
          ->Append({5, ClockDomain::kMonotonic, 9, "stderr", "x \"y\"\n", 3, "h1", "orig.log", 17})
          .ok());
  ASSERT_TRUE(
      (*log)->Append({6, ClockDomain::kRealtime, 10, "stdout", "plain", -1, "", "", 0}).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  // A torn last line, as after a crash, and a line of the wrong shape.
  {
    FILE* f = std::fopen((dir + "/logs/service.jsonl").c_str(), "ab");
    std::fputs("{\"ts_ns\": \"late\", \"text\": \"x\"}\n{\"ts_ns\": 7, \"te", f);
    std::fclose(f);
  }
  auto reader = BundleReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> seen;
  std::vector<ReadIssue> issues;
  ASSERT_TRUE(reader
                  ->ReadLogs(
                      [&](const LogLineRecord& l, const std::string& file, int64_t line) {
                        seen.push_back(fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", l.ts_ns,
                                                   ClockDomainName(l.clock), l.pid, l.stream,
                                                   l.text, l.rank, l.host, l.source, l.line, line));
                      },
                      &issues)
                  .ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "5|monotonic|9|stderr|x \"y\"\n|3|h1|orig.log|17|1");
  EXPECT_EQ(seen[1], "6|realtime|10|stdout|plain|-1|||0|2");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].counter, kIssueLogLineMalformed);
  EXPECT_EQ(issues[0].count, 2);
  EXPECT_EQ(issues[0].offset, 3u);  // first bad line
  EXPECT_NE(issues[0].detail.find("ts_ns"), std::string::npos);
}

TEST(BundleWriterTest, Crc32MatchesZlibAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(3);
  std::string data(5000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 16; offset += 5) {
    for (size_t size = 0; size + offset <= 700; ++size) {
      std::string_view bytes(data.data() + offset, size);
      ASSERT_EQ(Crc32(bytes), Crc32Portable(bytes)) << "offset " << offset << " size " << size;
    }
  }
  EXPECT_EQ(Crc32(data), Crc32Portable(data));
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(Crc32(std::string(64, 'a')), Crc32Portable(std::string(64, 'a')));
}

// Chunks holding a RangeBatch say minor 1; the others stay 1.0.
TEST(BundleWriterTest, RangeBatchChunksCarryMinorVersionOne) {
  std::string dir = base::TempDir("wire_batch_minor");
  {
    ProcessInfoRecord info;
    info.pid = 7;
    ProcessWriter w(dir, info, WriterOptions{});
    ASSERT_TRUE(w.Flush().ok());
    char entry[kMaxRangeBatchEntryBytes];
    char* end = EncodeRangeBatchEntry(entry, RecordKind::kRangePush, 5, RangeLayer::kFe, 0,
                                      w.InternString("n"));
    ASSERT_TRUE(
        w.AppendRangeBatch(3, ClockDomain::kMonotonic, std::string_view(entry, end - entry)).ok());
    ASSERT_TRUE(w.Close().ok());
  }
  auto bytes = base::ReadFile(dir + "/events-000000.bin");
  ASSERT_TRUE(bytes.ok());
  std::vector<std::pair<uint16_t, uint16_t>> kinds_minors;
  for (size_t at = 0; at + kChunkHeaderBytes <= bytes->size();) {
    ChunkHeader header;
    ASSERT_EQ(DecodeChunkHeader(reinterpret_cast<const uint8_t*>(bytes->data() + at), &header),
              HeaderCheck::kOk);
    kinds_minors.emplace_back(static_cast<uint16_t>(header.kind), header.minor);
    at += header.header_bytes + header.payload_bytes;
  }
  std::vector<std::pair<uint16_t, uint16_t>> want = {{2, 0}, {1, 0}, {2, 1}};
  EXPECT_EQ(kinds_minors, want);
}

// The rank's source is appended to ProcessInfo (1.2): its chunk says minor 2, a record
// without one stays the 1.0 bytes, and a restated record is read after the first.
TEST(BundleWriterTest, RankSourceIsAppendedAndARestatedProcessFollows) {
  std::string dir = base::TempDir("wire_rank_source");
  {
    ProcessInfoRecord info{9, -1, 0, -1, 0, "h", "python3", "python3 train.py"};
    ProcessWriter w(dir, info, WriterOptions{});
    ASSERT_TRUE(w.Flush().ok());
    ProcessInfoRecord learned = w.process_info();
    learned.rank = 1;
    learned.world_size = 2;
    learned.rank_source = "torch.distributed";
    ASSERT_TRUE(w.Restate(learned).ok());
    EXPECT_EQ(w.process_info().rank_source, "torch.distributed");
    EXPECT_EQ(w.process_info().command, "python3 train.py");
    ASSERT_TRUE(w.Close().ok());
  }
  auto bytes = base::ReadFile(dir + "/events-000000.bin");
  ASSERT_TRUE(bytes.ok());
  std::vector<std::pair<uint16_t, uint16_t>> kinds_minors;
  for (size_t at = 0; at + kChunkHeaderBytes <= bytes->size();) {
    ChunkHeader header;
    ASSERT_EQ(DecodeChunkHeader(reinterpret_cast<const uint8_t*>(bytes->data() + at), &header),
              HeaderCheck::kOk);
    kinds_minors.emplace_back(static_cast<uint16_t>(header.kind), header.minor);
    at += header.header_bytes + header.payload_bytes;
  }
  // The first record alone (1.0), then the new string and the restated record (1.2).
  std::vector<std::pair<uint16_t, uint16_t>> want = {{1, 0}, {2, 0}, {1, 0}, {2, 2}};
  EXPECT_EQ(kinds_minors, want);

  DescribingVisitor visitor;
  std::vector<ReadIssue> issues;
  auto stats = ReadEventFile(dir + "/events-000000.bin", &visitor, &issues);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(issues.empty());
  const std::vector<std::string>& got = visitor.lines;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(
      got[0],
      "process pid=9 rank=-1 local=0 world=-1 dev=0 host=h name=python3 cmd=python3 train.py");
  EXPECT_EQ(got[1],
            "process pid=9 rank=1 local=0 world=2 dev=0 host=h name=python3 cmd=python3 train.py "
            "rank_source=torch.distributed");
}

// A ring started after the restatement repeats the restated record in every segment.
TEST(BundleWriterTest, RingSegmentsRepeatTheRestatedProcess) {
  std::string dir = base::TempDir("wire_ring_restate");
  WriterOptions options;
  options.ring_ns = 3600'000'000'000;
  options.ring_max_bytes = 8 << 10;
  options.chunk_bytes = 512;
  auto writer = BundleWriter::Create(dir, SmallMeta(), options);
  ASSERT_TRUE(writer.ok());
  auto process = (*writer)->OpenProcess(ProcessInfoRecord{1, -1, 0, -1, 0, "h", "engine", ""});
  ASSERT_TRUE(process.ok());
  ProcessWriter* w = *process;
  ProcessInfoRecord learned = w->process_info();
  learned.rank = 3;
  learned.rank_source = "torch.distributed";
  ASSERT_TRUE(w->Restate(learned).ok());
  for (int i = 0; i < 400; ++i) {
    const std::string name = "mark-" + std::to_string(i);
    ASSERT_TRUE(w->Append(MarkRecord{ClockDomain::kMonotonic, 7, i, "d", name}).ok());
    if (i % 10 == 9) {
      ASSERT_TRUE(w->Flush().ok());
    }
  }
  EXPECT_GE(w->counters().ring_segments_dropped, 1u);  // the first record's segment is gone
  ASSERT_TRUE(w->Persist().ok());
  std::vector<ReadIssue> issues;
  std::vector<std::string> got = ReadBack(dir, &issues);
  EXPECT_TRUE(issues.empty());
  const size_t files = EventFiles(dir);
  EXPECT_GE(files, 2u);
  EXPECT_EQ(CountContaining(got, "process pid=1 rank=3 "), files);
  EXPECT_EQ(CountContaining(got, "process pid=1 rank=-1 "), 0u);
}

}  // namespace
}  // namespace teller::wire
