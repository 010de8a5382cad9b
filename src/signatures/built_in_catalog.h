// The catalog compiled into teller: src/signatures/catalog/*.json, embedded at build time.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "signatures/signature_catalog.h"

namespace teller::signatures {

struct BuiltInCatalogFile {
  std::string_view name;  // "cuda.json"
  std::string_view text;
};
// Generated (embed_catalog.cmake): the files in name order.
const std::vector<BuiltInCatalogFile>& BuiltInCatalogFiles();

// The built-in catalog, parsed once (thread-safe). An error names the file and entry at
// fault; the build's tests keep it from happening in a release.
base::StatusOr<const SignatureCatalog*> BuiltInCatalog();

// The built-in catalog plus users' files (later files override entries of the same id).
base::StatusOr<SignatureCatalog> LoadCatalog(const std::vector<std::string>& user_files);

}  // namespace teller::signatures
