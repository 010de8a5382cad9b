#include "wire/json_fields.h"

#include <cmath>

#include <fmt/format.h>

namespace teller::wire {

base::StatusOr<OrderedJson> ParseJsonText(std::string_view text, std::string_view source,
                                          std::string_view expected) {
  OrderedJson doc = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return base::InvalidArgument("{}: not valid JSON (expected {})", source, expected);
  }
  return doc;
}

JsonFields::JsonFields(std::string_view source, const OrderedJson& object, std::string path)
    : source_(source), object_(object), path_(std::move(path)) {}

std::string JsonFields::PathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

const OrderedJson* JsonFields::Find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(std::string(key));
  return it == object_.end() ? nullptr : &*it;
}

base::Status JsonFields::Expected(std::string_view path, std::string_view what,
                                  const OrderedJson& got) const {
  return base::InvalidArgument("{}: {}: expected {}, got {}", source_, path, what, got.type_name());
}

base::Status JsonFields::String(std::string_view key, std::string* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  if (!value->is_string()) return Expected(PathOf(key), "a string", *value);
  *out = value->get<std::string>();
  return base::OkStatus();
}

base::Status JsonFields::NullableString(std::string_view key,
                                        std::optional<std::string>* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  if (value->is_null()) {
    out->reset();
    return base::OkStatus();
  }
  if (!value->is_string()) return Expected(PathOf(key), "a string or null", *value);
  *out = value->get<std::string>();
  return base::OkStatus();
}

base::Status JsonFields::Bool(std::string_view key, bool* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  if (!value->is_boolean()) return Expected(PathOf(key), "true or false", *value);
  *out = value->get<bool>();
  return base::OkStatus();
}

base::Status JsonFields::Double(std::string_view key, double* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  if (!value->is_number() || !std::isfinite(value->get<double>())) {
    return Expected(PathOf(key), "a finite number", *value);
  }
  *out = value->get<double>();
  return base::OkStatus();
}

base::StatusOr<const OrderedJson*> JsonFields::Array(std::string_view key) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return static_cast<const OrderedJson*>(nullptr);
  if (!value->is_array()) return Expected(PathOf(key), "an array", *value);
  return value;
}

base::Status JsonFields::StringArray(std::string_view key, std::vector<std::string>* out) const {
  TELLER_ASSIGN_OR_RETURN(const OrderedJson* array, Array(key));
  if (array == nullptr) return base::OkStatus();
  out->clear();
  for (size_t i = 0; i < array->size(); ++i) {
    const OrderedJson& item = (*array)[i];
    if (!item.is_string()) {
      return Expected(fmt::format("{}[{}]", PathOf(key), i), "a string", item);
    }
    out->push_back(item.get<std::string>());
  }
  return base::OkStatus();
}

base::Status JsonFields::DoubleArray(std::string_view key, std::vector<double>* out) const {
  TELLER_ASSIGN_OR_RETURN(const OrderedJson* array, Array(key));
  if (array == nullptr) return base::OkStatus();
  out->clear();
  for (size_t i = 0; i < array->size(); ++i) {
    const OrderedJson& item = (*array)[i];
    if (!item.is_number() || !std::isfinite(item.get<double>())) {
      return Expected(fmt::format("{}[{}]", PathOf(key), i), "a finite number", item);
    }
    out->push_back(item.get<double>());
  }
  return base::OkStatus();
}

}  // namespace teller::wire
