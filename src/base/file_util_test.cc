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

TEST(FileUtilTest, MissingFileNamesThePath) {
  auto result = ReadFile("/nonexistent/teller/file.json");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("/nonexistent/teller/file.json"), std::string::npos);
}

}  // namespace
}  // namespace teller::base
