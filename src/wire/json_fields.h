// Typed reads of JSON fields for the dataset and labels readers (internal to wire):
// each error names the file, the JSON path of the field and what was expected, and
// no read throws. A field that is absent keeps the value the caller set before.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace teller::wire {

using OrderedJson = nlohmann::ordered_json;

// Parses text; the error names source and what the text should have been.
base::StatusOr<OrderedJson> ParseJsonText(std::string_view text, std::string_view source,
                                          std::string_view expected);

class JsonFields {
 public:
  // source: the file (or bundle) named in errors; path: the object's JSON path ("" at
  // the root, else e.g. "faults[2]").
  JsonFields(std::string_view source, const OrderedJson& object, std::string path);

  // The field's own path, e.g. "faults[2].target".
  std::string PathOf(std::string_view key) const;
  const OrderedJson* Find(std::string_view key) const;  // null when absent

  base::Status String(std::string_view key, std::string* out) const;
  base::Status NullableString(std::string_view key, std::optional<std::string>* out) const;
  base::Status Bool(std::string_view key, bool* out) const;
  base::Status Double(std::string_view key, double* out) const;
  template <typename T>
  base::Status Int(std::string_view key, T* out) const;
  template <typename T>
  base::Status NullableInt(std::string_view key, std::optional<T>* out) const;
  base::Status StringArray(std::string_view key, std::vector<std::string>* out) const;
  base::Status DoubleArray(std::string_view key, std::vector<double>* out) const;
  template <typename T>
  base::Status IntArray(std::string_view key, std::vector<T>* out) const;
  // The array at key (null when absent); an error when it is something else.
  base::StatusOr<const OrderedJson*> Array(std::string_view key) const;

  base::Status Expected(std::string_view path, std::string_view what, const OrderedJson& got) const;

 private:
  // value as T when it is an integer inside T's range.
  template <typename T>
  base::Status IntValue(const OrderedJson& value, std::string_view path, T* out) const;

  std::string source_;
  const OrderedJson& object_;
  std::string path_;
};

template <typename T>
base::Status JsonFields::IntValue(const OrderedJson& value, std::string_view path, T* out) const {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      *out = static_cast<T>(v);
      return base::OkStatus();
    }
  } else if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    const bool fits =
        v < 0 ? std::numeric_limits<T>::is_signed &&
                    v >= static_cast<int64_t>(std::numeric_limits<T>::min())
              : static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (fits) {
      *out = static_cast<T>(v);
      return base::OkStatus();
    }
  }
  return Expected(path, std::numeric_limits<T>::is_signed ? "an integer" : "a non-negative integer",
                  value);
}

template <typename T>
base::Status JsonFields::Int(std::string_view key, T* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  return IntValue(*value, PathOf(key), out);
}

template <typename T>
base::Status JsonFields::NullableInt(std::string_view key, std::optional<T>* out) const {
  const OrderedJson* value = Find(key);
  if (value == nullptr) return base::OkStatus();
  if (value->is_null()) {
    out->reset();
    return base::OkStatus();
  }
  T v{};
  TELLER_RETURN_IF_ERROR(IntValue(*value, PathOf(key), &v));
  *out = v;
  return base::OkStatus();
}

template <typename T>
base::Status JsonFields::IntArray(std::string_view key, std::vector<T>* out) const {
  TELLER_ASSIGN_OR_RETURN(const OrderedJson* array, Array(key));
  if (array == nullptr) return base::OkStatus();
  out->clear();
  for (size_t i = 0; i < array->size(); ++i) {
    T v{};
    TELLER_RETURN_IF_ERROR(IntValue((*array)[i], PathOf(key) + "[" + std::to_string(i) + "]", &v));
    out->push_back(v);
  }
  return base::OkStatus();
}

}  // namespace teller::wire
