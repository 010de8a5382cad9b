#include "capture/launcher_ranks.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace teller::capture {
namespace {

using Environment = std::map<std::string, std::string>;

LauncherRanks Resolve(const Environment& environment) {
  return ResolveLauncherRanks([&](const char* name) -> const char* {
    auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
}

struct Case {
  const char* what;
  Environment environment;
  int32_t rank, world_size, local_rank;
  std::string_view source;
};

TEST(LauncherRanksTest, EachLauncherSaysTheRankAndTheSourceIsNamed) {
  const Case cases[] = {
      {"nothing", {}, -1, -1, -1, ""},
      {"torchrun", {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}, 3, 8, 1, "RANK"},
      {"Open MPI",
       {{"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}},
       5,
       6,
       2,
       "OMPI_COMM_WORLD_RANK"},
      {"MPICH",
       {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}},
       1,
       2,
       1,
       "PMI_RANK"},
      {"PMIx under srun: size and local rank from Slurm",
       {{"PMIX_RANK", "4"}, {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}},
       4,
       8,
       0,
       "PMIX_RANK"},
      {"srun",
       {{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}},
       7,
       16,
       3,
       "SLURM_PROCID"},
      // torchrun under srun: torchrun's variables are the worker's, Slurm's the agent's.
      {"torchrun inside srun",
       {{"RANK", "9"},
        {"WORLD_SIZE", "16"},
        {"LOCAL_RANK", "1"},
        {"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_LOCALID", "0"}},
       9,
       16,
       1,
       "RANK"},
      // mpirun inside an allocation: Slurm's variables are those of the node's daemon.
      {"mpirun inside salloc",
       {{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_LOCALID", "0"}},
       3,
       4,
       1,
       "OMPI_COMM_WORLD_RANK"},
      {"a rank alone", {{"RANK", "0"}}, 0, -1, -1, "RANK"},
      {"the rank's launcher lacks a size: the next that has one",
       {{"RANK", "2"}, {"SLURM_NTASKS", "4"}},
       2,
       4,
       -1,
       "RANK"},
      {"no rank: size and local rank still read",
       {{"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}},
       -1,
       2,
       1,
       ""},
      {"a malformed rank is unset: the next launcher's",
       {{"RANK", "x1"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}},
       1,
       2,
       -1,
       "PMI_RANK"},
      {"empty, negative, trailing text, too large",
       {{"RANK", ""},
        {"OMPI_COMM_WORLD_RANK", "-1"},
        {"PMI_RANK", "2 "},
        {"PMIX_RANK", "1073741824"}},
       -1,
       -1,
       -1,
       ""},
      {"a world size of 0 is no size", {{"RANK", "0"}, {"WORLD_SIZE", "0"}}, 0, -1, -1, "RANK"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const LauncherRanks ranks = Resolve(c.environment);
    EXPECT_EQ(ranks.rank, c.rank);
    EXPECT_EQ(ranks.world_size, c.world_size);
    EXPECT_EQ(ranks.local_rank, c.local_rank);
    EXPECT_EQ(ranks.rank_source, c.source);
  }
}

}  // namespace
}  // namespace teller::capture
