#include "signatures/built_in_catalog.h"

#include "base/file_util.h"
#include "wire/signature_catalog_file.h"

namespace teller::signatures {
namespace {

base::StatusOr<SignatureCatalog> ParseBuiltIn() {
  SignatureCatalog catalog;
  for (const BuiltInCatalogFile& file : BuiltInCatalogFiles()) {
    const std::string origin = "built-in catalog " + std::string(file.name);
    TELLER_ASSIGN_OR_RETURN(wire::SignatureCatalogFile parsed,
                            wire::ParseSignatureCatalog(file.text, origin));
    TELLER_RETURN_IF_ERROR(catalog.Add(std::move(parsed), std::string(file.name)));
  }
  return catalog;
}

}  // namespace

base::StatusOr<const SignatureCatalog*> BuiltInCatalog() {
  static const base::StatusOr<SignatureCatalog> catalog = ParseBuiltIn();
  if (!catalog.ok()) return catalog.status();
  return &*catalog;
}

base::StatusOr<SignatureCatalog> LoadCatalog(const std::vector<std::string>& user_files) {
  TELLER_ASSIGN_OR_RETURN(const SignatureCatalog* built_in, BuiltInCatalog());
  SignatureCatalog catalog = *built_in;
  for (const std::string& path : user_files) {
    TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
    TELLER_ASSIGN_OR_RETURN(wire::SignatureCatalogFile parsed,
                            wire::ParseSignatureCatalog(text, path));
    TELLER_RETURN_IF_ERROR(catalog.Add(std::move(parsed), path));
  }
  return catalog;
}

}  // namespace teller::signatures
