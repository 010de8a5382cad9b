// Signature catalog files (schema teller-signatures/1): the messages engines, libraries,
// drivers and the kernel print, each with a fault category, what it means, what to check
// next and the source line that prints it. One reader (ParseSignatureCatalog: the
// built-in catalog of src/signatures/catalog/ and users' own files) and one writer
// (WriteSignatureCatalogJson). Spec: docs/signatures.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/fault_category.h"

namespace teller::wire {

inline constexpr char kSignatureCatalogSchema[] = "teller-signatures/1";

enum class SignatureSeverity : uint8_t { kInfo, kWarning, kError, kFatal };
enum class SignatureRole : uint8_t {
  kCause,        // names a root cause on its own
  kConsequence,  // printed because something earlier failed
  kBenign,       // looks alarming, appears in healthy runs
};
std::string_view SignatureSeverityName(SignatureSeverity severity);
std::string_view SignatureRoleName(SignatureRole role);

// Where the message is printed: repo/path/line (and the commit read), or a url with a
// note where no public source line exists.
struct SignatureSource {
  std::string repo;
  std::string path;
  int64_t line = 0;
  std::string commit;
  std::string url;
  std::string note;

  friend bool operator==(const SignatureSource&, const SignatureSource&) = default;
};

struct SignatureEntry {
  std::string id;
  // Case-insensitive fragments of one line; '*' matches any run of characters.
  std::vector<std::string> patterns;
  model::FaultCategory category = model::FaultCategory::kNone;
  SignatureSeverity severity = SignatureSeverity::kError;
  SignatureRole role = SignatureRole::kCause;
  std::string code;
  std::string meaning;
  std::string next_action;
  SignatureSource source;

  friend bool operator==(const SignatureEntry&, const SignatureEntry&) = default;
};

struct SignatureCatalogFile {
  std::string schema = kSignatureCatalogSchema;
  std::string description;
  std::vector<SignatureEntry> entries;

  friend bool operator==(const SignatureCatalogFile&, const SignatureCatalogFile&) = default;
};

// Reads one catalog file; errors name source, the JSON path and what was expected. Every
// entry needs an id, a non-empty pattern with a literal character, a known category,
// severity and role, a meaning, a next action, and a source (repo + path + line, or url).
base::StatusOr<SignatureCatalogFile> ParseSignatureCatalog(std::string_view text,
                                                           std::string_view source);
std::string WriteSignatureCatalogJson(const SignatureCatalogFile& catalog);

}  // namespace teller::wire
