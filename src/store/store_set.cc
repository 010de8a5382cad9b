#include "store/store_set.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "store/trace_store.h"

namespace teller::store {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kFormat = "teller-store-set";
constexpr int kFormatVersion = 1;

base::StatusOr<import::InputFormat> FormatNamed(const std::string& name, const std::string& path) {
  for (import::InputFormat format :
       {import::InputFormat::kBundle, import::InputFormat::kKineto, import::InputFormat::kNsys,
        import::InputFormat::kLog, import::InputFormat::kFlightRecorder}) {
    if (import::InputFormatName(format) == name) return format;
  }
  return base::InvalidArgument("{}: input format '{}' unknown", path, name);
}

struct ManifestUnit {
  import::ImportUnit unit;
  std::string store;  // "" when left out
  std::string left_out;
};

base::StatusOr<std::pair<import::ImportPlan, std::vector<ManifestUnit>>> ReadManifest(
    const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path));
  import::ImportPlan plan;
  std::vector<ManifestUnit> units;
  try {
    const Json doc = Json::parse(text);
    if (doc.at("format") != kFormat || doc.at("format_version") != kFormatVersion)
      return base::InvalidArgument("{}: not a {} of version {}", path, kFormat, kFormatVersion);
    plan.files = doc.at("files").get<std::vector<std::string>>();
    for (const Json& name : doc.at("formats")) {
      TELLER_ASSIGN_OR_RETURN(import::InputFormat format, FormatNamed(name.get<std::string>(), path));
      plan.formats.push_back(format);
    }
    for (const Json& u : doc.at("units")) {
      ManifestUnit unit;
      unit.unit.path = u.at("path").get<std::string>();
      unit.unit.file = u.at("file").get<size_t>();
      unit.unit.bundle_process = u.at("bundle_process").get<int32_t>();
      unit.unit.rank = u.at("rank").get<int32_t>();
      unit.store = u.value("store", "");
      unit.left_out = u.value("left_out", "");
      if (unit.unit.file >= plan.files.size() || (unit.store.empty() == unit.left_out.empty()))
        return base::InvalidArgument("{}: unit {} names no file, or neither or both of its "
                                     "store and why it was left out", path, units.size());
      plan.units.push_back(unit.unit);
      units.push_back(std::move(unit));
    }
  } catch (const Json::exception& e) {
    return base::InvalidArgument("{}: not a store set manifest: {}", path, e.what());
  }
  if (plan.formats.size() != plan.files.size())
    return base::InvalidArgument("{}: {} files and {} formats", path, plan.files.size(),
                                 plan.formats.size());
  return std::pair{std::move(plan), std::move(units)};
}

}  // namespace

std::string UnitStoreName(size_t unit) { return fmt::format("unit-{:05d}.db", unit); }

base::Status WriteStoreSetManifest(const import::ImportPlan& plan,
                                   const std::vector<import::SkippedUnit>& left_out,
                                   const std::string& directory) {
  Json units = Json::array();
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const import::ImportUnit& unit = plan.units[u];
    Json entry = {{"path", unit.path},
                  {"file", unit.file},
                  {"bundle_process", unit.bundle_process},
                  {"rank", unit.rank}};
    const auto skipped = std::find_if(left_out.begin(), left_out.end(),
                                      [&](const import::SkippedUnit& s) { return s.unit == u; });
    if (skipped == left_out.end()) {
      entry["store"] = UnitStoreName(u);
    } else {
      entry["left_out"] = skipped->status.message();
    }
    units.push_back(std::move(entry));
  }
  Json formats = Json::array();
  for (import::InputFormat format : plan.formats) formats.push_back(import::InputFormatName(format));
  const Json doc = {{"format", kFormat},   {"format_version", kFormatVersion},
                    {"files", plan.files}, {"formats", formats},
                    {"units", units}};
  return base::WriteFileAtomic((fs::path(directory) / kStoreSetManifest).string(),
                               doc.dump(1) + "\n");
}

bool IsStoreSet(const std::string& directory) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(directory) / kStoreSetManifest, ec);
}

base::StatusOr<model::Trace> OpenStoreSet(const std::string& directory,
                                          const import::ImportOptions& options) {
  const std::string manifest = (fs::path(directory) / kStoreSetManifest).string();
  TELLER_ASSIGN_OR_RETURN(auto read, ReadManifest(manifest));
  const import::ImportPlan& plan = read.first;
  const std::vector<ManifestUnit>& units = read.second;
  auto take = [&](size_t unit) -> base::StatusOr<model::Trace> {
    if (!units[unit].left_out.empty()) return base::NotFound("{}", units[unit].left_out);
    return LoadTrace((fs::path(directory) / units[unit].store).string());
  };
  model::Trace trace;
  std::vector<import::SkippedUnit> skipped;
  TELLER_RETURN_IF_ERROR(import::ImportPlanned(plan, options, take, &trace, &skipped).status());
  for (const import::SkippedUnit& s : skipped) {
    if (units[s.unit].left_out.empty())
      return s.status.WithContext(fmt::format("{}: unit {}", directory, s.unit));
  }
  return trace;
}

}  // namespace teller::store
