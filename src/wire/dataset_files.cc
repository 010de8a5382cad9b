#include "wire/dataset_files.h"

#include <filesystem>

#include <fmt/format.h>

#include "base/file_util.h"
#include "wire/json_fields.h"

namespace teller::wire {
namespace {

using Json = OrderedJson;

constexpr char kHeldOutEngines[] = "held_out_engines";
constexpr char kHeldOutMechanisms[] = "held_out_mechanisms";

std::string PathIn(const std::string& folder, const char* file) {
  return (std::filesystem::path(folder) / file).string();
}

Json BundleJson(const ManifestBundle& b) {
  Json entry;
  entry["bundle"] = b.bundle;
  entry["engine"] = b.engine;
  entry["seed"] = b.seed;
  entry["model"] = b.model;
  entry["fault"] = b.fault;
  entry["category"] = b.category ? Json(*b.category) : Json(nullptr);
  entry["requests"] = b.requests;
  entry["faulty_requests"] = b.faulty_requests;
  entry["engine_steps"] = b.engine_steps;
  entry["events"] = b.events;
  entry["crashed"] = b.crashed;
  return entry;
}

base::Status ReadBundle(const JsonFields& f, ManifestBundle* out) {
  const Json* name = f.Find("bundle");
  if (name == nullptr || !name->is_string()) {
    return f.Expected(f.PathOf("bundle"), "the bundle's folder name (a string)",
                      name == nullptr ? Json(nullptr) : *name);
  }
  TELLER_RETURN_IF_ERROR(f.String("bundle", &out->bundle));
  TELLER_RETURN_IF_ERROR(f.String("engine", &out->engine));
  TELLER_RETURN_IF_ERROR(f.Int("seed", &out->seed));
  TELLER_RETURN_IF_ERROR(f.String("model", &out->model));
  TELLER_RETURN_IF_ERROR(f.String("fault", &out->fault));
  TELLER_RETURN_IF_ERROR(f.NullableString("category", &out->category));
  TELLER_RETURN_IF_ERROR(f.StringArray("requests", &out->requests));
  TELLER_RETURN_IF_ERROR(f.Int("faulty_requests", &out->faulty_requests));
  TELLER_RETURN_IF_ERROR(f.Int("engine_steps", &out->engine_steps));
  TELLER_RETURN_IF_ERROR(f.Int("events", &out->events));
  return f.Bool("crashed", &out->crashed);
}

base::StatusOr<DatasetSplit> ReadSplit(std::string_view source, const std::string& name,
                                       const Json& value) {
  DatasetSplit split;
  split.name = name;
  const JsonFields f(source, value, name);
  for (const auto& [key, item] : value.items()) {
    if (key == kHeldOutEngines || key == kHeldOutMechanisms) {
      std::vector<std::string> names;
      TELLER_RETURN_IF_ERROR(f.StringArray(key, &names));
      (key == kHeldOutEngines ? split.held_out_engines : split.held_out_mechanisms) = names;
      continue;
    }
    if (!item.is_array()) {
      return f.Expected(f.PathOf(key), "an array of \"bundle/request\" keys", item);
    }
    SplitPart part;
    part.name = key;
    for (size_t i = 0; i < item.size(); ++i) {
      if (!item[i].is_string()) {
        return base::InvalidArgument("{}: {}.{}[{}] is not a \"bundle/request\" string", source,
                                     name, key, i);
      }
      part.keys.push_back(item[i].get<std::string>());
    }
    split.parts.push_back(std::move(part));
  }
  return split;
}

}  // namespace

const SplitPart* DatasetSplit::FindPart(std::string_view part) const {
  for (const SplitPart& p : parts) {
    if (p.name == part) return &p;
  }
  return nullptr;
}

const DatasetSplit* DatasetSplits::Find(std::string_view split) const {
  for (const DatasetSplit& s : splits) {
    if (s.name == split) return &s;
  }
  return nullptr;
}

std::string WriteManifestJson(const DatasetManifest& manifest) {
  Json root;
  if (manifest.preset) root["preset"] = *manifest.preset;
  if (manifest.seed) root["seed"] = *manifest.seed;
  Json bundles = Json::array();
  for (const ManifestBundle& b : manifest.bundles) bundles.push_back(BundleJson(b));
  root["bundles"] = std::move(bundles);
  return root.dump(1) + "\n";
}

std::string WriteSplitsJson(const DatasetSplits& splits) {
  Json root = Json::object();
  if (splits.seed) root["seed"] = *splits.seed;
  for (const DatasetSplit& split : splits.splits) {
    Json object = Json::object();
    if (split.held_out_engines) object[kHeldOutEngines] = *split.held_out_engines;
    if (split.held_out_mechanisms) object[kHeldOutMechanisms] = *split.held_out_mechanisms;
    for (const SplitPart& part : split.parts) object[part.name] = part.keys;
    root[split.name] = std::move(object);
  }
  return root.dump(1) + "\n";
}

base::Status WriteDatasetFiles(const std::string& folder, const DatasetManifest& manifest,
                               const DatasetSplits& splits) {
  TELLER_RETURN_IF_ERROR(
      base::WriteFileAtomic(PathIn(folder, kManifestFileName), WriteManifestJson(manifest)));
  return base::WriteFileAtomic(PathIn(folder, kSplitsFileName), WriteSplitsJson(splits));
}

base::StatusOr<DatasetManifest> ParseManifest(std::string_view text, std::string_view source) {
  TELLER_ASSIGN_OR_RETURN(const Json doc, ParseJsonText(text, source, "a teller dataset manifest"));
  const JsonFields root(source, doc, "");
  const Json* bundles = root.Find("bundles");
  if (!doc.is_object() || bundles == nullptr || !bundles->is_array()) {
    return base::InvalidArgument("{}: expected {{\"bundles\": [{{\"bundle\": NAME, ...}}]}}",
                                 source);
  }
  DatasetManifest manifest;
  if (root.Find("preset") != nullptr) {
    manifest.preset.emplace();
    TELLER_RETURN_IF_ERROR(root.String("preset", &*manifest.preset));
  }
  TELLER_RETURN_IF_ERROR(root.NullableInt("seed", &manifest.seed));
  for (size_t i = 0; i < bundles->size(); ++i) {
    const Json& entry = (*bundles)[i];
    const std::string path = fmt::format("bundles[{}]", i);
    if (!entry.is_object()) return root.Expected(path, "an object", entry);
    ManifestBundle bundle;
    TELLER_RETURN_IF_ERROR(ReadBundle(JsonFields(source, entry, path), &bundle));
    manifest.bundles.push_back(std::move(bundle));
  }
  return manifest;
}

base::StatusOr<DatasetSplits> ParseSplits(std::string_view text, std::string_view source) {
  TELLER_ASSIGN_OR_RETURN(const Json doc,
                          ParseJsonText(text, source, "the splits of a teller dataset"));
  if (!doc.is_object()) {
    return base::InvalidArgument("{}: expected an object of splits, got {}", source,
                                 doc.type_name());
  }
  const JsonFields root(source, doc, "");
  DatasetSplits splits;
  TELLER_RETURN_IF_ERROR(root.NullableInt("seed", &splits.seed));
  for (const auto& [key, value] : doc.items()) {
    if (key == "seed") continue;
    if (!value.is_object()) return root.Expected(key, "a split (an object of parts)", value);
    TELLER_ASSIGN_OR_RETURN(DatasetSplit split, ReadSplit(source, key, value));
    splits.splits.push_back(std::move(split));
  }
  return splits;
}

base::StatusOr<DatasetManifest> ReadManifest(const std::string& folder) {
  const std::string path = PathIn(folder, kManifestFileName);
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseManifest(text, path);
}

base::StatusOr<DatasetSplits> ReadSplits(const std::string& folder) {
  const std::string path = PathIn(folder, kSplitsFileName);
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseSplits(text, path);
}

}  // namespace teller::wire
