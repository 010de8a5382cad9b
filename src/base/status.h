// Status and StatusOr: the one error style of teller. A message names the file,
// the offset or event, and what was expected.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace teller::base {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kDataLoss,
  kUnimplemented,
  kIoError,
  kInternal
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* c_message() const { return message_.c_str(); }
  std::string ToString() const;

  // Prepends context ("while reading x: ") to the message of a failed status.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status Unimplemented(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kUnimplemented, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(format, std::forward<Args>(args)...));
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr built from an ok Status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace teller::base

#define TELLER_STATUS_CONCAT_INNER(a, b) a##b
#define TELLER_STATUS_CONCAT(a, b) TELLER_STATUS_CONCAT_INNER(a, b)

#define TELLER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::teller::base::Status teller_status_ = (expr);  \
    if (!teller_status_.ok()) return teller_status_; \
  } while (false)

#define TELLER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#define TELLER_ASSIGN_OR_RETURN(lhs, expr) \
  TELLER_ASSIGN_OR_RETURN_IMPL(TELLER_STATUS_CONCAT(teller_statusor_, __LINE__), lhs, expr)
