// A traced process's rank, local rank and world size as its launcher said them in the
// environment. Launchers in order (the first whose rank variable is set wins):
//
//   launcher            rank                  world size             local rank
//   torchrun            RANK                  WORLD_SIZE             LOCAL_RANK
//   Open MPI (mpirun)   OMPI_COMM_WORLD_RANK  OMPI_COMM_WORLD_SIZE   OMPI_COMM_WORLD_LOCAL_RANK
//   MPICH (Hydra, PMI)  PMI_RANK              PMI_SIZE               MPI_LOCALRANKID
//   PMIx                PMIX_RANK             -                      -
//   Slurm (srun)        SLURM_PROCID          SLURM_NTASKS           SLURM_LOCALID
//
// World size and local rank come from the rank's launcher; where it does not say them
// (PMIx), or no launcher says a rank, each is the first of its column that is set. A
// value is a decimal integer in [0, 2^30) (world size at least 1); anything else is as
// if unset. The process group's rank (torch.distributed), which the Python hooks learn
// later, may restate these (docs/capture.md, "Ranks").
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace teller::capture {

struct LauncherRanks {
  int32_t rank = -1;  // -1: no launcher said it
  int32_t local_rank = -1;
  int32_t world_size = -1;
  // The variable the rank came from ("RANK", "OMPI_COMM_WORLD_RANK", ...); empty when
  // rank is -1. Points at a string literal.
  std::string_view rank_source;
};

// The value of an environment variable, nullptr when unset (std::getenv, or a map in tests).
using EnvironmentLookup = std::function<const char*(const char* name)>;

LauncherRanks ResolveLauncherRanks(const EnvironmentLookup& lookup);

}  // namespace teller::capture
