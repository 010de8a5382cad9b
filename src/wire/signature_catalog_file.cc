#include "wire/signature_catalog_file.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "wire/json_fields.h"

namespace teller::wire {
namespace {

using Json = OrderedJson;

constexpr std::array<std::string_view, 4> kSeverityNames = {"info", "warning", "error", "fatal"};
constexpr std::array<std::string_view, 3> kRoleNames = {"cause", "consequence", "benign"};

template <typename Enum, size_t N>
base::Status ReadEnum(std::string_view origin, const JsonFields& fields, std::string_view key,
                      const std::array<std::string_view, N>& names, Enum* out) {
  std::string name;
  TELLER_RETURN_IF_ERROR(fields.String(key, &name));
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) {
      *out = static_cast<Enum>(i);
      return base::OkStatus();
    }
  }
  return base::InvalidArgument("{}: {}: expected one of {}, got \"{}\"", origin, fields.PathOf(key),
                               fmt::join(names, ", "), name);
}

base::Status Required(std::string_view origin, const JsonFields& fields, std::string_view key,
                      const std::string& value) {
  if (value.empty()) {
    return base::InvalidArgument("{}: {}: expected a non-empty string", origin, fields.PathOf(key));
  }
  return base::OkStatus();
}

base::Status ReadSource(const JsonFields& entry, std::string_view origin, SignatureSource* out) {
  const Json* source = entry.Find("source");
  if (source == nullptr || !source->is_object()) {
    return base::InvalidArgument("{}: {}: expected an object (repo, path, line or url)", origin,
                                 entry.PathOf("source"));
  }
  JsonFields fields(origin, *source, entry.PathOf("source"));
  TELLER_RETURN_IF_ERROR(fields.String("repo", &out->repo));
  TELLER_RETURN_IF_ERROR(fields.String("path", &out->path));
  TELLER_RETURN_IF_ERROR(fields.Int("line", &out->line));
  TELLER_RETURN_IF_ERROR(fields.String("commit", &out->commit));
  TELLER_RETURN_IF_ERROR(fields.String("url", &out->url));
  TELLER_RETURN_IF_ERROR(fields.String("note", &out->note));
  const bool cites_line = !out->repo.empty() && !out->path.empty() && out->line > 0;
  if (!cites_line && out->url.empty()) {
    return base::InvalidArgument("{}: {}: expected repo, path and a line >= 1, or a url", origin,
                                 entry.PathOf("source"));
  }
  return base::OkStatus();
}

base::Status ReadEntry(std::string_view origin, const Json& object, std::string path,
                       SignatureEntry* out) {
  if (!object.is_object()) {
    return base::InvalidArgument("{}: {}: expected an object, got {}", origin, path,
                                 object.type_name());
  }
  JsonFields fields(origin, object, std::move(path));
  TELLER_RETURN_IF_ERROR(fields.String("id", &out->id));
  TELLER_RETURN_IF_ERROR(Required(origin, fields, "id", out->id));
  TELLER_RETURN_IF_ERROR(fields.StringArray("patterns", &out->patterns));
  if (out->patterns.empty()) {
    return base::InvalidArgument("{}: {}: expected at least one pattern", origin,
                                 fields.PathOf("patterns"));
  }
  for (size_t i = 0; i < out->patterns.size(); ++i) {
    if (out->patterns[i].find_first_not_of('*') == std::string::npos) {
      return base::InvalidArgument("{}: {}[{}]: expected literal text, got \"{}\"", origin,
                                   fields.PathOf("patterns"), i, out->patterns[i]);
    }
  }
  std::string category;
  TELLER_RETURN_IF_ERROR(fields.String("category", &category));
  if (!model::IsFaultCategoryName(category)) {
    return base::InvalidArgument(
        "{}: {}: expected memory_resource, cuda_kernel, runtime_driver, communication_network, "
        "scheduling_software or none, got \"{}\"",
        origin, fields.PathOf("category"), category);
  }
  out->category = model::FaultCategoryFromName(category);
  TELLER_RETURN_IF_ERROR(ReadEnum(origin, fields, "severity", kSeverityNames, &out->severity));
  TELLER_RETURN_IF_ERROR(ReadEnum(origin, fields, "role", kRoleNames, &out->role));
  if (out->category == model::FaultCategory::kNone && out->role != SignatureRole::kBenign) {
    return base::InvalidArgument("{}: {}: category none is only for role benign", origin,
                                 fields.PathOf("category"));
  }
  TELLER_RETURN_IF_ERROR(fields.String("code", &out->code));
  TELLER_RETURN_IF_ERROR(fields.String("meaning", &out->meaning));
  TELLER_RETURN_IF_ERROR(Required(origin, fields, "meaning", out->meaning));
  TELLER_RETURN_IF_ERROR(fields.String("next_action", &out->next_action));
  if (out->role != SignatureRole::kBenign) {
    TELLER_RETURN_IF_ERROR(Required(origin, fields, "next_action", out->next_action));
  }
  return ReadSource(fields, origin, &out->source);
}

Json SourceJson(const SignatureSource& source) {
  Json j = Json::object();
  if (!source.repo.empty()) j["repo"] = source.repo;
  if (!source.path.empty()) j["path"] = source.path;
  if (source.line > 0) j["line"] = source.line;
  if (!source.commit.empty()) j["commit"] = source.commit;
  if (!source.url.empty()) j["url"] = source.url;
  if (!source.note.empty()) j["note"] = source.note;
  return j;
}

}  // namespace

std::string_view SignatureSeverityName(SignatureSeverity severity) {
  return kSeverityNames[static_cast<size_t>(severity)];
}

std::string_view SignatureRoleName(SignatureRole role) {
  return kRoleNames[static_cast<size_t>(role)];
}

base::StatusOr<SignatureCatalogFile> ParseSignatureCatalog(std::string_view text,
                                                           std::string_view source) {
  TELLER_ASSIGN_OR_RETURN(Json doc, ParseJsonText(text, source, "a teller-signatures/1 catalog"));
  if (!doc.is_object()) {
    return base::InvalidArgument("{}: expected a JSON object with \"format\" and \"entries\"",
                                 source);
  }
  JsonFields root(source, doc, "");
  SignatureCatalogFile catalog;
  catalog.schema.clear();
  TELLER_RETURN_IF_ERROR(root.String("format", &catalog.schema));
  if (catalog.schema != kSignatureCatalogSchema) {
    return base::InvalidArgument("{}: format: expected \"{}\", got \"{}\"", source,
                                 kSignatureCatalogSchema, catalog.schema);
  }
  TELLER_RETURN_IF_ERROR(root.String("description", &catalog.description));
  TELLER_ASSIGN_OR_RETURN(const Json* entries, root.Array("entries"));
  if (entries == nullptr) return base::InvalidArgument("{}: entries: expected an array", source);
  catalog.entries.resize(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    TELLER_RETURN_IF_ERROR(
        ReadEntry(source, (*entries)[i], fmt::format("entries[{}]", i), &catalog.entries[i]));
  }
  return catalog;
}

std::string WriteSignatureCatalogJson(const SignatureCatalogFile& catalog) {
  Json entries = Json::array();
  for (const SignatureEntry& entry : catalog.entries) {
    Json j;
    j["id"] = entry.id;
    j["patterns"] = entry.patterns;
    j["category"] = model::FaultCategoryName(entry.category);
    j["severity"] = SignatureSeverityName(entry.severity);
    j["role"] = SignatureRoleName(entry.role);
    if (!entry.code.empty()) j["code"] = entry.code;
    j["meaning"] = entry.meaning;
    if (!entry.next_action.empty()) j["next_action"] = entry.next_action;
    j["source"] = SourceJson(entry.source);
    entries.push_back(std::move(j));
  }
  Json doc;
  doc["format"] = catalog.schema;
  if (!catalog.description.empty()) doc["description"] = catalog.description;
  doc["entries"] = std::move(entries);
  return doc.dump(2) + "\n";
}

}  // namespace teller::wire
