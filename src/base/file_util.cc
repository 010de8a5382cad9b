#include "base/file_util.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace teller::base {
namespace {

struct FileCloser {
  void operator()(FILE* file) const {
    if (file) std::fclose(file);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

StatusOr<FilePtr> OpenForRead(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgument("{}: is a directory, expected a file", path);
  FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  return FilePtr(file);
}

class PlainReader : public ChunkReader {
 public:
  PlainReader(FilePtr file, std::string path, uint64_t size)
      : file_(std::move(file)), path_(std::move(path)), size_(size) {}
  StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    size_t old = out->size();
    out->resize(old + max_bytes);
    size_t got = std::fread(out->data() + old, 1, max_bytes, file_.get());
    out->resize(old + got);
    if (got == 0 && std::ferror(file_.get())) {
      return IoError("{}: read error at offset {}: {}", path_, offset_, std::strerror(errno));
    }
    offset_ += got;
    return got;
  }
  uint64_t file_offset() const override { return offset_; }
  uint64_t file_size() const override { return size_; }

 private:
  FilePtr file_;
  std::string path_;
  uint64_t size_;
  uint64_t offset_ = 0;
};

class GzipReader : public ChunkReader {
 public:
  GzipReader(FilePtr file, std::string path, uint64_t size)
      : file_(std::move(file)), path_(std::move(path)), size_(size), input_(1 << 16, '\0') {
    std::memset(&stream_, 0, sizeof(stream_));
    inflateInit2(&stream_, 15 + 32);  // auto-detect gzip/zlib headers
  }
  ~GzipReader() override { inflateEnd(&stream_); }

  StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    if (done_) return size_t{0};
    size_t old = out->size();
    out->resize(old + max_bytes);
    stream_.next_out = reinterpret_cast<Bytef*>(out->data() + old);
    stream_.avail_out = static_cast<uInt>(max_bytes);
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0) {
        size_t got = std::fread(input_.data(), 1, input_.size(), file_.get());
        if (got == 0) {
          out->resize(old + max_bytes - stream_.avail_out);
          if (std::ferror(file_.get()))
            return IoError("{}: read error at offset {}", path_, offset_);
          return DataLoss("{}: gzip stream truncated at compressed offset {} (expected more data)",
                          path_, offset_);
        }
        offset_ += got;
        stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
        stream_.avail_in = static_cast<uInt>(got);
      }
      int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Concatenated gzip members continue; otherwise stop.
        if (stream_.avail_in == 0) {
          int c = std::fgetc(file_.get());
          if (c == EOF) {
            done_ = true;
            break;
          }
          std::ungetc(c, file_.get());
        }
        inflateReset(&stream_);
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        out->resize(old + max_bytes - stream_.avail_out);
        return DataLoss("{}: corrupt gzip data near compressed offset {}: {}", path_,
                        offset_ - stream_.avail_in, stream_.msg ? stream_.msg : "inflate failed");
      }
    }
    size_t produced = max_bytes - stream_.avail_out;
    out->resize(old + produced);
    return produced;
  }
  uint64_t file_offset() const override { return offset_ - stream_.avail_in; }
  uint64_t file_size() const override { return size_; }

 private:
  FilePtr file_;
  std::string path_;
  uint64_t size_;
  uint64_t offset_ = 0;
  std::string input_;
  z_stream stream_;
  bool done_ = false;
};

}  // namespace

bool IsGzipMagic(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f &&
         static_cast<uint8_t>(head[1]) == 0x8b;
}

StatusOr<std::unique_ptr<ChunkReader>> ChunkReader::Open(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(FilePtr file, OpenForRead(path));
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) size = 0;
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, file.get());
  std::rewind(file.get());
  if (got == 2 && IsGzipMagic(std::string_view(reinterpret_cast<char*>(magic), 2))) {
    return std::unique_ptr<ChunkReader>(new GzipReader(std::move(file), path, size));
  }
  return std::unique_ptr<ChunkReader>(new PlainReader(std::move(file), path, size));
}

StatusOr<std::string> ReadFile(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(FilePtr file, OpenForRead(path));
  std::string contents;
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec) contents.reserve(size);
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0)
    contents.append(buffer, got);
  if (std::ferror(file.get())) return IoError("{}: read error at offset {}", path, contents.size());
  return contents;
}

StatusOr<std::string> ReadFileMaybeGzip(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<ChunkReader> reader, ChunkReader::Open(path));
  std::string contents;
  if (reader->file_size() > 0) contents.reserve(reader->file_size());
  while (true) {
    TELLER_ASSIGN_OR_RETURN(size_t got, reader->Read(&contents, 1 << 20));
    if (got == 0) break;
  }
  return contents;
}

StatusOr<std::string> ReadHead(const std::string& path, size_t max_bytes) {
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<ChunkReader> reader, ChunkReader::Open(path));
  std::string head;
  while (head.size() < max_bytes) {
    auto got = reader->Read(&head, max_bytes - head.size());
    if (!got.ok() || *got == 0) break;  // a short or damaged file still has a head
  }
  return head;
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  std::string tmp = path + ".tmp";
  FILE* file = std::fopen(tmp.c_str(), "wb");
  if (!file) return IoError("{}: cannot create: {}", tmp, std::strerror(errno));
  size_t wrote = std::fwrite(contents.data(), 1, contents.size(), file);
  bool failed = wrote != contents.size() || std::fflush(file) != 0;
  std::fclose(file);
  if (failed) {
    std::remove(tmp.c_str());
    return IoError("{}: write failed after {} of {} bytes", path, wrote, contents.size());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("{}: cannot rename from {}: {}", path, tmp, std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace teller::base
