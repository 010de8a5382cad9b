#include "wire/bundle_meta.h"

#include <nlohmann/json.hpp>

#include "wire/wire_format.h"

namespace teller::wire {
namespace {

using Json = nlohmann::ordered_json;

// Field readers: each names the file and the JSON path of what was wrong.
class MetaParser {
 public:
  explicit MetaParser(const std::string& file_name) : file_(file_name) {}

  base::Status Int(const Json& object, const char* key, const std::string& path, bool required,
                   int64_t* out) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      if (!required) return base::OkStatus();
      return base::InvalidArgument("{}: {}{}: missing, expected an integer", file_, path, key);
    }
    if (!it->is_number_integer()) {
      return base::InvalidArgument("{}: {}{}: expected an integer, got {}", file_, path, key,
                                   it->type_name());
    }
    *out =
        it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>()) : it->get<int64_t>();
    return base::OkStatus();
  }
  template <typename T>
  base::Status Int32(const Json& object, const char* key, const std::string& path, T* out) {
    int64_t v = *out;
    TELLER_RETURN_IF_ERROR(Int(object, key, path, false, &v));
    *out = static_cast<T>(v);
    return base::OkStatus();
  }
  base::Status String(const Json& object, const char* key, const std::string& path,
                      std::string* out) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return base::OkStatus();
    if (!it->is_string()) {
      return base::InvalidArgument("{}: {}{}: expected a string, got {}", file_, path, key,
                                   it->type_name());
    }
    *out = it->get<std::string>();
    return base::OkStatus();
  }
  base::StatusOr<const Json*> Array(const Json& object, const char* key, const std::string& path) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return static_cast<const Json*>(nullptr);
    if (!it->is_array()) {
      return base::InvalidArgument("{}: {}{}: expected an array, got {}", file_, path, key,
                                   it->type_name());
    }
    return &*it;
  }
  base::Status Object(const Json& value, const std::string& path) {
    if (value.is_object()) return base::OkStatus();
    return base::InvalidArgument("{}: {}: expected an object, got {}", file_, path,
                                 value.type_name());
  }

  base::Status ClockPairs(const Json& object, const std::string& path,
                          std::vector<ClockPair>* out) {
    TELLER_ASSIGN_OR_RETURN(const Json* pairs, Array(object, "clock_pairs", path));
    if (!pairs) return base::OkStatus();
    for (size_t i = 0; i < pairs->size(); ++i) {
      std::string item = fmt::format("{}clock_pairs[{}]", path, i);
      const Json& pair = (*pairs)[i];
      TELLER_RETURN_IF_ERROR(Object(pair, item));
      ClockPair p;
      TELLER_RETURN_IF_ERROR(Int(pair, "realtime_ns", item + ".", true, &p.realtime_ns));
      TELLER_RETURN_IF_ERROR(Int(pair, "monotonic_ns", item + ".", true, &p.monotonic_ns));
      int64_t gpu = 0;
      if (pair.contains("gpu_ns") && !pair["gpu_ns"].is_null()) {
        TELLER_RETURN_IF_ERROR(Int(pair, "gpu_ns", item + ".", true, &gpu));
        p.gpu_ns = gpu;
      }
      out->push_back(p);
    }
    return base::OkStatus();
  }

 private:
  const std::string& file_;
};

Json ClockPairsJson(const std::vector<ClockPair>& pairs) {
  Json list = Json::array();
  for (const ClockPair& p : pairs) {
    Json item = {{"realtime_ns", p.realtime_ns}, {"monotonic_ns", p.monotonic_ns}};
    if (p.gpu_ns) item["gpu_ns"] = *p.gpu_ns;
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace

const std::vector<ClockPair>& BundleMeta::ClockPairsOf(std::string_view host_name) const {
  for (const HostClocks& h : hosts) {
    if (h.host == host_name && !h.clock_pairs.empty()) return h.clock_pairs;
  }
  return clock_pairs;
}

base::StatusOr<BundleMeta> ParseBundleMeta(std::string_view text, const std::string& file_name) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the bad one included; report its 0-based offset.
    return base::InvalidArgument("{}: not valid JSON at offset {}: {}", file_name,
                                 e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const std::exception& e) {
    return base::InvalidArgument("{}: not valid JSON: {}", file_name, e.what());
  }
  try {
    MetaParser p(file_name);
    TELLER_RETURN_IF_ERROR(p.Object(root, "top level"));
    std::string format;
    TELLER_RETURN_IF_ERROR(p.String(root, "format", "", &format));
    if (format != kFormatName) {
      return base::InvalidArgument("{}: format: expected \"{}\", got \"{}\"", file_name,
                                   kFormatName, format);
    }
    BundleMeta meta;
    int64_t version = 0;
    TELLER_RETURN_IF_ERROR(p.Int(root, "format_version", "", true, &version));
    if (version < 1 || version > kFormatMajor) {
      return base::Unimplemented("{}: format_version {} is not supported (this reader reads {})",
                                 file_name, version, kFormatMajor);
    }
    meta.format_version = static_cast<int>(version);
    TELLER_RETURN_IF_ERROR(p.String(root, "tool_version", "", &meta.tool_version));
    TELLER_RETURN_IF_ERROR(p.String(root, "host", "", &meta.host));
    TELLER_RETURN_IF_ERROR(p.Int(root, "start_time_ns", "", false, &meta.start_time_ns));
    TELLER_ASSIGN_OR_RETURN(const Json* command, p.Array(root, "command", ""));
    if (command) {
      for (size_t i = 0; i < command->size(); ++i) {
        if (!(*command)[i].is_string()) {
          return base::InvalidArgument("{}: command[{}]: expected a string", file_name, i);
        }
        meta.command.push_back((*command)[i].get<std::string>());
      }
    }
    TELLER_RETURN_IF_ERROR(p.ClockPairs(root, "", &meta.clock_pairs));
    TELLER_ASSIGN_OR_RETURN(const Json* hosts, p.Array(root, "hosts", ""));
    for (size_t i = 0; hosts && i < hosts->size(); ++i) {
      std::string path = fmt::format("hosts[{}]", i);
      const Json& h = (*hosts)[i];
      TELLER_RETURN_IF_ERROR(p.Object(h, path));
      HostClocks clocks;
      TELLER_RETURN_IF_ERROR(p.String(h, "name", path + ".", &clocks.host));
      TELLER_RETURN_IF_ERROR(p.ClockPairs(h, path + ".", &clocks.clock_pairs));
      meta.hosts.push_back(std::move(clocks));
    }
    TELLER_ASSIGN_OR_RETURN(const Json* ranks, p.Array(root, "ranks", ""));
    for (size_t i = 0; ranks && i < ranks->size(); ++i) {
      std::string path = fmt::format("ranks[{}].", i);
      const Json& r = (*ranks)[i];
      TELLER_RETURN_IF_ERROR(p.Object(r, path));
      RankInfo rank;
      TELLER_RETURN_IF_ERROR(p.Int32(r, "rank", path, &rank.rank));
      TELLER_RETURN_IF_ERROR(p.Int32(r, "local_rank", path, &rank.local_rank));
      TELLER_RETURN_IF_ERROR(p.String(r, "host", path, &rank.host));
      TELLER_RETURN_IF_ERROR(p.Int(r, "pid", path, false, &rank.pid));
      TELLER_RETURN_IF_ERROR(p.Int32(r, "device", path, &rank.device));
      meta.ranks.push_back(std::move(rank));
    }
    TELLER_ASSIGN_OR_RETURN(const Json* devices, p.Array(root, "devices", ""));
    for (size_t i = 0; devices && i < devices->size(); ++i) {
      std::string path = fmt::format("devices[{}].", i);
      const Json& d = (*devices)[i];
      TELLER_RETURN_IF_ERROR(p.Object(d, path));
      DeviceInfo device;
      TELLER_RETURN_IF_ERROR(p.String(d, "host", path, &device.host));
      TELLER_RETURN_IF_ERROR(p.Int32(d, "index", path, &device.index));
      TELLER_RETURN_IF_ERROR(p.String(d, "name", path, &device.name));
      TELLER_RETURN_IF_ERROR(p.String(d, "uuid", path, &device.uuid));
      meta.devices.push_back(std::move(device));
    }
    TELLER_ASSIGN_OR_RETURN(const Json* capture, p.Array(root, "capture", ""));
    for (size_t i = 0; capture && i < capture->size(); ++i) {
      std::string path = fmt::format("capture[{}].", i);
      const Json& c = (*capture)[i];
      TELLER_RETURN_IF_ERROR(p.Object(c, path));
      CaptureLayer layer;
      TELLER_RETURN_IF_ERROR(p.String(c, "layer", path, &layer.layer));
      auto enabled = c.find("enabled");
      if (enabled != c.end()) {
        if (!enabled->is_boolean()) {
          return base::InvalidArgument("{}: {}enabled: expected true or false", file_name, path);
        }
        layer.enabled = enabled->get<bool>();
      }
      TELLER_RETURN_IF_ERROR(p.String(c, "reason", path, &layer.reason));
      meta.capture.push_back(std::move(layer));
    }
    TELLER_ASSIGN_OR_RETURN(const Json* notes, p.Array(root, "notes", ""));
    for (size_t i = 0; notes && i < notes->size(); ++i) {
      if (!(*notes)[i].is_string()) {
        return base::InvalidArgument("{}: notes[{}]: expected a string", file_name, i);
      }
      meta.notes.push_back((*notes)[i].get<std::string>());
    }
    return meta;
  } catch (const std::exception& e) {
    return base::InvalidArgument("{}: unexpected content: {}", file_name, e.what());
  }
}

base::StatusOr<std::string> FormatBundleMeta(const BundleMeta& meta) {
  try {
    Json root;
    root["format"] = kFormatName;
    root["format_version"] = meta.format_version;
    root["tool_version"] = meta.tool_version;
    root["host"] = meta.host;
    root["command"] = meta.command;
    root["start_time_ns"] = meta.start_time_ns;
    root["clock_pairs"] = ClockPairsJson(meta.clock_pairs);
    Json hosts = Json::array();
    for (const HostClocks& h : meta.hosts) {
      hosts.push_back({{"name", h.host}, {"clock_pairs", ClockPairsJson(h.clock_pairs)}});
    }
    root["hosts"] = std::move(hosts);
    Json ranks = Json::array();
    for (const RankInfo& r : meta.ranks) {
      ranks.push_back({{"rank", r.rank},
                       {"local_rank", r.local_rank},
                       {"host", r.host},
                       {"pid", r.pid},
                       {"device", r.device}});
    }
    root["ranks"] = std::move(ranks);
    Json devices = Json::array();
    for (const DeviceInfo& d : meta.devices) {
      devices.push_back({{"host", d.host}, {"index", d.index}, {"name", d.name}, {"uuid", d.uuid}});
    }
    root["devices"] = std::move(devices);
    Json capture = Json::array();
    for (const CaptureLayer& c : meta.capture) {
      Json item = {{"layer", c.layer}, {"enabled", c.enabled}};
      if (!c.reason.empty()) item["reason"] = c.reason;
      capture.push_back(std::move(item));
    }
    root["capture"] = std::move(capture);
    root["notes"] = meta.notes;
    return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  } catch (const std::exception& e) {
    return base::Internal("meta.json: cannot serialize: {}", e.what());
  }
}

}  // namespace teller::wire
