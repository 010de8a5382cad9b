// The fleet without MPI: every call says what to install.
#include "fleet/fleet_open.h"

#include <cstdlib>

namespace teller::fleet {
namespace {

base::Status NoMpi() {
  return base::Unimplemented(
      "--distributed needs MPI: this teller was built without it (apt install libopenmpi-dev "
      "openmpi-bin, then build again: scripts/setup.sh)");
}

}  // namespace

bool Available() { return false; }

base::StatusOr<std::unique_ptr<Session>> Session::Start() { return NoMpi(); }
Session::~Session() = default;
void Session::Abort(int code) const { std::_Exit(code); }

base::StatusOr<FleetTrace> OpenTraceDistributed(const Session&, const std::vector<std::string>&,
                                                const store::OpenOptions&,
                                                const DistributedOptions&) {
  return NoMpi();
}

}  // namespace teller::fleet
