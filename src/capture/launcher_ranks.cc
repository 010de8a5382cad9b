#include "capture/launcher_ranks.h"

#include <cstdlib>

namespace teller::capture {
namespace {

struct Launcher {
  const char* rank;
  const char* world_size;  // nullptr: the launcher has none
  const char* local_rank;
};

// The order of docs/capture.md, "Ranks".
constexpr Launcher kLaunchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"PMIX_RANK", nullptr, nullptr},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

// The variable's value when it is a decimal integer in [min, 2^30), else -1.
int32_t ParseRankValue(const EnvironmentLookup& lookup, const char* name, int32_t min) {
  if (name == nullptr) return -1;
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < min || parsed >= (1L << 30)) return -1;
  return static_cast<int32_t>(parsed);
}

// The launcher's own variable first, then the column in launcher order.
int32_t FirstOf(const EnvironmentLookup& lookup, const Launcher* own, const char* Launcher::*column,
                int32_t min) {
  if (own != nullptr) {
    if (int32_t value = ParseRankValue(lookup, own->*column, min); value >= 0) return value;
  }
  for (const Launcher& launcher : kLaunchers) {
    if (int32_t value = ParseRankValue(lookup, launcher.*column, min); value >= 0) return value;
  }
  return -1;
}

}  // namespace

LauncherRanks ResolveLauncherRanks(const EnvironmentLookup& lookup) {
  LauncherRanks ranks;
  const Launcher* own = nullptr;
  for (const Launcher& launcher : kLaunchers) {
    ranks.rank = ParseRankValue(lookup, launcher.rank, 0);
    if (ranks.rank >= 0) {
      own = &launcher;
      ranks.rank_source = launcher.rank;
      break;
    }
  }
  ranks.world_size = FirstOf(lookup, own, &Launcher::world_size, 1);
  ranks.local_rank = FirstOf(lookup, own, &Launcher::local_rank, 0);
  return ranks;
}

}  // namespace teller::capture
