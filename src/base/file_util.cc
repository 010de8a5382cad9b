#include "base/file_util.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

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

// Runs an inner reader on its own thread, up to kDepth chunks ahead of Read. Each chunk
// keeps the inner reader's status, so bytes and errors arrive as the inner reader gave
// them.
class ReadAheadReader : public ChunkReader {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  static constexpr size_t kDepth = 4;

  explicit ReadAheadReader(std::unique_ptr<ChunkReader> inner)
      : inner_(std::move(inner)), size_(inner_->file_size()), worker_([this] { Produce(); }) {}
  ~ReadAheadReader() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    if (at_ == current_.bytes.size()) {
      if (current_.last)
        return current_.status.ok() ? StatusOr<size_t>(size_t{0}) : current_.status;
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !ready_.empty(); });
      current_ = std::move(ready_.front());
      ready_.pop_front();
      at_ = 0;
      lock.unlock();
      changed_.notify_all();
      offset_ = current_.file_offset;
    }
    const size_t take = std::min(max_bytes, current_.bytes.size() - at_);
    out->append(current_.bytes, at_, take);
    at_ += take;
    // An error arrives with the chunk's last bytes, as the inner reader returned it.
    if (at_ == current_.bytes.size() && !current_.status.ok()) return current_.status;
    if (take == 0 && current_.last) return size_t{0};
    return take;
  }
  uint64_t file_offset() const override { return offset_; }
  uint64_t file_size() const override { return size_; }

 private:
  struct Chunk {
    std::string bytes;
    Status status;
    bool last = false;
    uint64_t file_offset = 0;
  };

  void Produce() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < kDepth; });
        if (stop_) return;
      }
      Chunk chunk;
      StatusOr<size_t> got = inner_->Read(&chunk.bytes, kChunkBytes);
      chunk.file_offset = inner_->file_offset();
      if (!got.ok()) chunk.status = got.status();
      const bool last = chunk.last = !got.ok() || *got == 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(chunk));
      }
      changed_.notify_all();
      if (last) return;
    }
  }

  std::unique_ptr<ChunkReader> inner_;
  uint64_t size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Chunk> ready_;
  bool stop_ = false;
  Chunk current_;
  size_t at_ = 0;
  uint64_t offset_ = 0;
  std::thread worker_;  // last: starts once the members above exist
};

}  // namespace

bool IsGzipMagic(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f &&
         static_cast<uint8_t>(head[1]) == 0x8b;
}

StatusOr<std::unique_ptr<ChunkReader>> ChunkReader::Open(const std::string& path, bool read_ahead) {
  TELLER_ASSIGN_OR_RETURN(FilePtr file, OpenForRead(path));
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) size = 0;
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, file.get());
  std::rewind(file.get());
  if (got == 2 && IsGzipMagic(std::string_view(reinterpret_cast<char*>(magic), 2))) {
    std::unique_ptr<ChunkReader> gzip(new GzipReader(std::move(file), path, size));
    if (read_ahead) return std::unique_ptr<ChunkReader>(new ReadAheadReader(std::move(gzip)));
    return gzip;
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
