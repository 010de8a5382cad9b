#include "learn/weights_file.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include "base/file_util.h"

namespace teller::learn {
namespace {

static_assert(std::endian::native == std::endian::little, "weights.bin is little-endian");

constexpr uint32_t kMaxNameLength = 256;
constexpr uint32_t kMaxRank = 4;

template <typename T>
void Append(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  template <typename T>
  base::Status Read(T* value, const char* what) {
    if (bytes_.size() - at_ < sizeof(T)) return Truncated(what);
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return base::OkStatus();
  }
  base::Status ReadBytes(size_t count, const char* what, std::string_view* out) {
    if (bytes_.size() - at_ < count) return Truncated(what);
    *out = bytes_.substr(at_, count);
    at_ += count;
    return base::OkStatus();
  }
  base::Status Bad(const std::string& what) const {
    return base::DataLoss("{}: offset {}: {}", path_, at_, what);
  }
  size_t left() const { return bytes_.size() - at_; }

 private:
  base::Status Truncated(const char* what) const {
    return base::DataLoss("{}: offset {}: the file ends where {} was expected", path_, at_, what);
  }
  std::string_view bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

base::Status ReadTensor(Reader* reader, NamedTensor* tensor) {
  uint32_t name_length = 0, rank = 0;
  TELLER_RETURN_IF_ERROR(reader->Read(&name_length, "a tensor name length"));
  if (name_length == 0 || name_length > kMaxNameLength)
    return reader->Bad(
        fmt::format("tensor name length {} out of 1..{}", name_length, kMaxNameLength));
  std::string_view name;
  TELLER_RETURN_IF_ERROR(reader->ReadBytes(name_length, "a tensor name", &name));
  tensor->name = std::string(name);
  TELLER_RETURN_IF_ERROR(reader->Read(&rank, "a tensor rank"));
  if (rank > kMaxRank)
    return reader->Bad(
        fmt::format("tensor {} has rank {}, at most {}", tensor->name, rank, kMaxRank));
  uint64_t count = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t size = 0;
    TELLER_RETURN_IF_ERROR(reader->Read(&size, "a tensor size"));
    // A tensor can hold no more floats than the bytes left.
    if (size < 0 || static_cast<uint64_t>(size) > reader->left() / sizeof(float) + 1)
      return reader->Bad(
          fmt::format("tensor {} has size {} in dimension {}", tensor->name, size, d));
    count *= static_cast<uint64_t>(size);
    if (count > reader->left())
      return reader->Bad(fmt::format("tensor {} is larger than the file", tensor->name));
    tensor->shape.push_back(size);
  }
  std::string_view values;
  TELLER_RETURN_IF_ERROR(reader->ReadBytes(count * sizeof(float), "tensor values", &values));
  tensor->values.resize(count);
  if (count > 0) std::memcpy(tensor->values.data(), values.data(), values.size());
  for (float v : tensor->values) {
    if (!std::isfinite(v)) return reader->Bad(fmt::format("tensor {} holds {}", tensor->name, v));
  }
  return base::OkStatus();
}

}  // namespace

std::string SerializeWeights(const NamedTensors& tensors) {
  std::string out(kWeightsMagic);
  Append<uint32_t>(&out, kWeightsVersion);
  Append<uint32_t>(&out, static_cast<uint32_t>(tensors.size()));
  for (const NamedTensor& t : tensors) {
    Append<uint32_t>(&out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    Append<uint32_t>(&out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t size : t.shape) Append<int64_t>(&out, size);
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  }
  return out;
}

base::StatusOr<NamedTensors> ParseWeights(std::string_view bytes, const std::string& path) {
  Reader reader(bytes, path);
  std::string_view magic;
  TELLER_RETURN_IF_ERROR(reader.ReadBytes(kWeightsMagic.size(), "the magic TLWEIGHT", &magic));
  if (magic != kWeightsMagic)
    return base::DataLoss("{}: offset 0: not a teller weights file (expected TLWEIGHT)", path);
  uint32_t version = 0, count = 0;
  TELLER_RETURN_IF_ERROR(reader.Read(&version, "the version"));
  if (version != kWeightsVersion)
    return reader.Bad(fmt::format("version {}, this teller reads {}", version, kWeightsVersion));
  TELLER_RETURN_IF_ERROR(reader.Read(&count, "the tensor count"));
  if (count > reader.left() / 8)
    return reader.Bad(fmt::format("{} tensors in a file this short", count));
  NamedTensors tensors(count);
  std::set<std::string> names;
  for (NamedTensor& tensor : tensors) {
    TELLER_RETURN_IF_ERROR(ReadTensor(&reader, &tensor));
    if (!names.insert(tensor.name).second)
      return reader.Bad(fmt::format("tensor {} appears twice", tensor.name));
  }
  if (reader.left() != 0)
    return reader.Bad(fmt::format("{} bytes after the last tensor", reader.left()));
  return tensors;
}

base::Status WriteWeightsFile(const NamedTensors& tensors, const std::string& path) {
  return base::WriteFileAtomic(path, SerializeWeights(tensors));
}

base::StatusOr<NamedTensors> ReadWeightsFile(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path));
  return ParseWeights(bytes, path);
}

}  // namespace teller::learn
