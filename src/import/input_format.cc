#include "import/input_format.h"

#include <algorithm>
#include <filesystem>

#include "base/file_util.h"

namespace teller::import {

std::string_view InputFormatName(InputFormat format) {
  switch (format) {
    case InputFormat::kUnknown:
      return "unknown";
    case InputFormat::kBundle:
      return "bundle";
    case InputFormat::kKineto:
      return "kineto";
    case InputFormat::kNsys:
      return "nsys";
    case InputFormat::kLog:
      return "log";
    case InputFormat::kFlightRecorder:
      return "flight_recorder";
  }
  return "unknown";
}

// Text logs and JSON have no NUL bytes and few control bytes at their start; images,
// archives and other binaries do. Only the first bytes count: a log cut by a crash
// may end in NUL padding.
bool LooksBinary(std::string_view head) {
  std::string_view start = head.substr(0, 512);
  size_t control = 0;
  for (char c : start) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == 0) return true;
    if (byte < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\x1b') ++control;
  }
  return control * 10 > start.size();
}

// A JSON-lines log: its first line is one whole JSON object (a Kineto trace opens an
// object that spans many lines, or the whole file on one line).
bool FirstLineIsJsonObject(std::string_view text) {
  const size_t end = text.find('\n');
  if (end == std::string_view::npos) return false;
  std::string_view line = text.substr(0, end);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  return line.size() > 1 && line.front() == '{' && line.back() == '}';
}

// A bare Chrome-trace array opens with an event object ("[{" or "[\n  {"); "[2026-...",
// "[rank0]:", "[ 1234.5]" and "[TensorRT-LLM]" are log prefixes.
bool OpensEventArray(std::string_view text) {
  size_t i = 1;
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) {
    ++i;
  }
  return i < text.size() && (text[i] == '{' || text[i] == ']');
}

InputFormat DetectFormatFromHead(std::string_view head) {
  if (head.substr(0, 16) == std::string_view("SQLite format 3\0", 16)) return InputFormat::kNsys;
  size_t i = 0;
  while (i < head.size() &&
         (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) {
    ++i;
  }
  const std::string_view text = head.substr(i);
  if (text.empty()) return InputFormat::kLog;
  if (text[0] == '[') return OpensEventArray(text) ? InputFormat::kKineto : InputFormat::kLog;
  if (text[0] != '{') return InputFormat::kLog;
  // A Kineto trace is one object with "traceEvents"; a JSON-lines log is one object a line.
  if (text.find("\"traceEvents\"") != std::string_view::npos) return InputFormat::kKineto;
  if (LooksLikeFlightRecorderDump(text)) return InputFormat::kFlightRecorder;
  if (FirstLineIsJsonObject(text)) return InputFormat::kLog;
  for (std::string_view key : {"\"schemaVersion\"", "\"deviceProperties\"", "\"displayTimeUnit\"",
                               "\"distributedInfo\""}) {
    if (text.find(key) != std::string_view::npos) return InputFormat::kKineto;
  }
  return InputFormat::kLog;
}

base::StatusOr<InputFormat> DetectFormat(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (std::filesystem::exists(std::filesystem::path(path) / "meta.json", ec)) {
      return InputFormat::kBundle;
    }
    return base::InvalidArgument("{}: a directory without meta.json is not a teller bundle", path);
  }
  if (!std::filesystem::exists(path, ec)) return base::NotFound("{}: no such file", path);
  TELLER_ASSIGN_OR_RETURN(std::string head, base::ReadHead(path, 1 << 16));
  if (head.empty()) return base::InvalidArgument("{}: empty file, cannot tell its format", path);
  InputFormat format = DetectFormatFromHead(head);
  if (format == InputFormat::kLog && static_cast<unsigned char>(head[0]) == 0x80) {
    return base::InvalidArgument(
        "{}: a Python pickle at offset 0 (a Flight Recorder dump?); teller reads its JSON form: "
        "python3 -c \"import json,pickle,sys; json.dump(pickle.load(open(sys.argv[1],'rb')), "
        "open(sys.argv[1]+'.json','w'), default=str)\" {}",
        path, path);
  }
  if (format == InputFormat::kLog && LooksBinary(head)) {
    std::string first_bytes;
    for (size_t i = 0; i < std::min<size_t>(head.size(), 8); ++i) {
      first_bytes += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(head[i]));
    }
    return base::InvalidArgument(
        "{}: binary data at offset 0 (bytes {}), expected a Kineto JSON trace, an Nsight "
        "Systems SQLite export or a text log",
        path, first_bytes);
  }
  return format;
}

}  // namespace teller::import
