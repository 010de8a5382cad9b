#include "learn/trainer_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace teller::learn {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> PluginFolders() {
  std::vector<fs::path> folders;
  if (const char* env = std::getenv("TELLER_LIB_DIR"); env && *env) folders.emplace_back(env);
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    folders.push_back(exe.parent_path() / "lib");
    folders.push_back(exe.parent_path().parent_path() / "lib" / "teller");
    folders.push_back(exe.parent_path().parent_path() / "lib");
  }
#ifdef TELLER_DEFAULT_BINARY_DIR
  folders.push_back(fs::path(TELLER_DEFAULT_BINARY_DIR) / "lib");
#endif
  return folders;
}

base::StatusOr<const TrainerPlugin*> Load() {
  std::vector<std::string> looked;
  for (const fs::path& folder : PluginFolders()) {
    const fs::path path = folder / kTrainerLibrary;
    std::error_code error;
    if (!fs::is_regular_file(path, error)) {
      looked.push_back(folder.lexically_normal().string());
      continue;
    }
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr)
      return base::IoError("{}: cannot load the trainer: {}", path.string(), dlerror());
    using Entry = const TrainerPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(library, kTrainerEntry));
    const TrainerPlugin* plugin = entry ? entry() : nullptr;
    if (plugin == nullptr || plugin->abi != kTrainerAbi || plugin->fit == nullptr ||
        plugin->fit_log_comparison == nullptr || plugin->fit_single_stream == nullptr ||
        !std::equal(std::begin(kTrainerTypeSizes), std::end(kTrainerTypeSizes),
                    std::begin(plugin->type_sizes))) {
      return base::InvalidArgument(
          "{}: a trainer from another build of teller (rebuild teller: scripts/setup.sh)",
          path.string());
    }
    return plugin;
  }
  return base::Unimplemented(
      "the trainer ({}) is not installed: teller was built without libtorch (apt install "
      "libtorch-dev, then scripts/setup.sh); looked in {}",
      kTrainerLibrary, fmt::join(looked, ", "));
}

}  // namespace

base::StatusOr<const TrainerPlugin*> LoadTrainerPlugin() {
  static std::once_flag once;
  static base::StatusOr<const TrainerPlugin*> loaded = base::Unimplemented("not loaded");
  std::call_once(once, [] { loaded = Load(); });
  return loaded;
}

}  // namespace teller::learn
