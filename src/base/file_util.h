// Reading and writing whole files and gzip streams; errors name the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace teller::base {

StatusOr<std::string> ReadFile(const std::string& path);
// Reads a file, inflating it when it starts with the gzip magic.
StatusOr<std::string> ReadFileMaybeGzip(const std::string& path);
// Writes to path.tmp and renames, so readers never see half a file.
Status WriteFileAtomic(const std::string& path, std::string_view contents);
bool IsGzipMagic(std::string_view head);
// Returns up to max_bytes of the file's start, inflated when gzip.
StatusOr<std::string> ReadHead(const std::string& path, size_t max_bytes);

// Streams a plain or gzip file in chunks.
class ChunkReader {
 public:
  // read_ahead: a gzip file is inflated on a second thread, a few chunks ahead of the
  // reader, so inflating and parsing run at once (what a reader sees is unchanged).
  static StatusOr<std::unique_ptr<ChunkReader>> Open(const std::string& path,
                                                     bool read_ahead = false);
  virtual ~ChunkReader() = default;
  // Appends up to max_bytes to out; returns 0 at end of input.
  virtual StatusOr<size_t> Read(std::string* out, size_t max_bytes) = 0;
  // Bytes consumed from the file so far (compressed bytes for gzip).
  virtual uint64_t file_offset() const = 0;
  virtual uint64_t file_size() const = 0;
};

}  // namespace teller::base
