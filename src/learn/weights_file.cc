#include "learn/weights_file.h"

#include <cmath>
#include <cstring>
#include <set>

#include "base/byte_io.h"
#include "base/file_util.h"

namespace teller::learn {
namespace {

constexpr uint32_t kMaxNameLength = 256;
constexpr uint32_t kMaxRank = 4;

base::Status ReadTensor(base::ByteReader* reader, NamedTensor* tensor) {
  uint32_t name_length = 0, rank = 0;
  TELLER_RETURN_IF_ERROR(reader->Value(&name_length, "a tensor name length"));
  if (name_length == 0 || name_length > kMaxNameLength)
    return reader->Bad(
        fmt::format("tensor name length {} out of 1..{}", name_length, kMaxNameLength));
  std::string_view name;
  TELLER_RETURN_IF_ERROR(reader->Bytes(name_length, "a tensor name", &name));
  tensor->name = std::string(name);
  TELLER_RETURN_IF_ERROR(reader->Value(&rank, "a tensor rank"));
  if (rank > kMaxRank)
    return reader->Bad(
        fmt::format("tensor {} has rank {}, at most {}", tensor->name, rank, kMaxRank));
  uint64_t count = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t size = 0;
    TELLER_RETURN_IF_ERROR(reader->Value(&size, "a tensor size"));
    // A tensor can hold no more floats than the bytes left.
    if (size < 0 || static_cast<uint64_t>(size) > reader->left() / sizeof(float) + 1)
      return reader->Bad(
          fmt::format("tensor {} has size {} in dimension {}", tensor->name, size, d));
    count *= static_cast<uint64_t>(size);
    if (count > reader->left())
      return reader->Bad(fmt::format("tensor {} is larger than the file", tensor->name));
    tensor->shape.push_back(size);
  }
  TELLER_RETURN_IF_ERROR(reader->Array(count, "tensor values", &tensor->values));
  for (float v : tensor->values) {
    if (!std::isfinite(v)) return reader->Bad(fmt::format("tensor {} holds {}", tensor->name, v));
  }
  return base::OkStatus();
}

}  // namespace

std::string SerializeWeights(const NamedTensors& tensors) {
  base::ByteWriter out;
  out.Bytes(kWeightsMagic);
  out.Value<uint32_t>(kWeightsVersion);
  out.Value<uint32_t>(static_cast<uint32_t>(tensors.size()));
  for (const NamedTensor& t : tensors) {
    out.Value<uint32_t>(static_cast<uint32_t>(t.name.size()));
    out.Bytes(t.name);
    out.Value<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    out.Array(t.shape);
    out.Array(t.values);
  }
  return out.Take();
}

base::StatusOr<NamedTensors> ParseWeights(std::string_view bytes, const std::string& path) {
  base::ByteReader reader(bytes, path);
  std::string_view magic;
  TELLER_RETURN_IF_ERROR(reader.Bytes(kWeightsMagic.size(), "the magic TLWEIGHT", &magic));
  if (magic != kWeightsMagic)
    return base::DataLoss("{}: offset 0: not a teller weights file (expected TLWEIGHT)", path);
  uint32_t version = 0, count = 0;
  TELLER_RETURN_IF_ERROR(reader.Value(&version, "the version"));
  if (version != kWeightsVersion)
    return reader.Bad(fmt::format("version {}, this teller reads {}", version, kWeightsVersion));
  TELLER_RETURN_IF_ERROR(reader.Value(&count, "the tensor count"));
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
