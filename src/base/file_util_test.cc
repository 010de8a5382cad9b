#include "base/file_util.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

namespace teller::base {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("teller_base_" + name)).string();
}

void WriteGzip(const std::string& path, const std::string& data) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, data.data(), static_cast<unsigned>(data.size()));
  gzclose(file);
}

TEST(FileUtilTest, ReadsPlainAndGzipAlike) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data += "line " + std::to_string(i) + "\n";
  std::string plain = TempPath("plain.txt"), gz = TempPath("data.gz");
  ASSERT_TRUE(WriteFileAtomic(plain, data).ok());
  WriteGzip(gz, data);
  EXPECT_EQ(*ReadFileMaybeGzip(plain), data);
  EXPECT_EQ(*ReadFileMaybeGzip(gz), data);
  EXPECT_EQ(*ReadHead(gz, 10), data.substr(0, 10));
}

TEST(FileUtilTest, TruncatedGzipIsDataLossNamingTheFile) {
  std::string data(1 << 20, 'a');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>('a' + i % 26);
  std::string gz = TempPath("cut.gz");
  WriteGzip(gz, data);
  std::string bytes = *ReadFile(gz);
  ASSERT_TRUE(WriteFileAtomic(gz, bytes.substr(0, bytes.size() / 2)).ok());
  auto result = ReadFileMaybeGzip(gz);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find(gz), std::string::npos);
}

// Everything a reader gets, chunk by chunk of max_bytes: the bytes, then the status
// that ended the reading.
std::pair<std::string, Status> ReadAll(const std::string& path, bool read_ahead, size_t max_bytes) {
  auto reader = ChunkReader::Open(path, read_ahead);
  EXPECT_TRUE(reader.ok());
  std::string out;
  while (true) {
    StatusOr<size_t> got = (*reader)->Read(&out, max_bytes);
    if (!got.ok()) return {out, got.status()};
    if (*got == 0) return {out, OkStatus()};
  }
}

// Inflating ahead on a second thread gives the same bytes and the same error at the
// same place, whatever the reader's chunk size; a reader dropped early stops cleanly.
TEST(FileUtilTest, ReadAheadGivesWhatTheGzipReaderGives) {
  std::string data;
  for (int64_t i = 0; i < 400000; ++i) data += "event " + std::to_string(i * 7919 % 100003) + "\n";
  const std::string gz = TempPath("ahead.gz"), cut = TempPath("ahead_cut.gz");
  WriteGzip(gz, data);
  const std::string bytes = *ReadFile(gz);
  ASSERT_TRUE(WriteFileAtomic(cut, bytes.substr(0, bytes.size() * 2 / 3)).ok());
  for (size_t max_bytes : {size_t{1000}, size_t{1} << 20, size_t{3} << 20}) {
    const auto whole = ReadAll(gz, true, max_bytes);
    EXPECT_EQ(whole.first, data);
    EXPECT_TRUE(whole.second.ok());
    const auto plain = ReadAll(cut, false, max_bytes);
    const auto ahead = ReadAll(cut, true, max_bytes);
    EXPECT_EQ(ahead.first, plain.first);
    EXPECT_EQ(ahead.second.code(), StatusCode::kDataLoss);
    EXPECT_EQ(ahead.second.message(), plain.second.message());
  }
  auto early = ChunkReader::Open(gz, true);
  ASSERT_TRUE(early.ok());
  std::string head;
  ASSERT_TRUE((*early)->Read(&head, 10).ok());
  EXPECT_EQ(head, data.substr(0, 10));
}

TEST(FileUtilTest, MissingFileNamesThePath) {
  auto result = ReadFile("/nonexistent/teller/file.json");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("/nonexistent/teller/file.json"), std::string::npos);
}

}  // namespace
}  // namespace teller::base
