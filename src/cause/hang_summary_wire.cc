#include "cause/hang_summary_wire.h"

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kCollectivesMagic = "TLHC";
// The fewest bytes a communicator and a member take (their strings empty).
constexpr size_t kCommunicatorBytes = 3 * sizeof(uint64_t);
constexpr size_t kMemberBytes = sizeof(int32_t) + 5 * sizeof(int64_t);

base::Status DecodeMember(base::WireReader* in, int32_t previous_rank, CollectiveMember* member) {
  TELLER_RETURN_IF_ERROR(in->Value(&member->rank, "a member's rank"));
  if (member->rank <= previous_rank) {
    return in->Bad(fmt::format("rank {}, above {} expected (members go by rank)", member->rank,
                               previous_rank));
  }
  TELLER_RETURN_IF_ERROR(in->Value(&member->sequence, "a member's sequence"));
  if (member->sequence < 0) {
    return in->Bad(fmt::format("sequence {}, at least 0 expected", member->sequence));
  }
  std::string_view op;
  TELLER_RETURN_IF_ERROR(in->String("a member's op", &op));
  member->op = std::string(op);
  TELLER_RETURN_IF_ERROR(in->Value(&member->size_bytes, "a member's size"));
  TELLER_RETURN_IF_ERROR(in->Value(&member->start_ns, "a member's start"));
  return in->Value(&member->dur_ns, "a member's duration");
}

base::Status DecodeCommunicator(base::WireReader* in, CommunicatorCollectives* communicator) {
  std::string_view name;
  TELLER_RETURN_IF_ERROR(in->String("a communicator's name", &name));
  communicator->name = std::string(name);
  TELLER_RETURN_IF_ERROR(in->Column("a communicator's durations", &communicator->durations));
  uint64_t members = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&members, "a communicator's member count"));
  if (members > in->left() / kMemberBytes) {
    return in->Bad(
        fmt::format("{} members, more than the {} bytes left hold", members, in->left()));
  }
  communicator->members.resize(members);
  int32_t previous_rank = -1;
  for (CollectiveMember& member : communicator->members) {
    TELLER_RETURN_IF_ERROR(DecodeMember(in, previous_rank, &member));
    previous_rank = member.rank;
  }
  return base::OkStatus();
}

}  // namespace

std::string EncodeCollectiveSummary(const CollectiveSummary& summary) {
  base::WireWriter out(kCollectivesMagic, kCollectiveSummaryWireVersion);
  out.Value<uint64_t>(summary.size());
  for (const CommunicatorCollectives& communicator : summary) {
    out.String(communicator.name);
    out.Column(communicator.durations);
    out.Value<uint64_t>(communicator.members.size());
    for (const CollectiveMember& member : communicator.members) {
      out.Value<int32_t>(member.rank);
      out.Value<int64_t>(member.sequence);
      out.String(member.op);
      out.Value<int64_t>(member.size_bytes);
      out.Value<int64_t>(member.start_ns);
      out.Value<int64_t>(member.dur_ns);
    }
  }
  return out.Take();
}

base::StatusOr<CollectiveSummary> DecodeCollectiveSummary(std::string_view bytes) {
  static const std::string kWhat = "collective summary";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kCollectivesMagic, kCollectiveSummaryWireVersion));
  uint64_t count = 0;
  TELLER_RETURN_IF_ERROR(in.Value(&count, "the communicator count"));
  if (count > in.left() / kCommunicatorBytes) {
    return in.Bad(
        fmt::format("{} communicators, more than the {} bytes left hold", count, in.left()));
  }
  CollectiveSummary summary(count);
  for (CommunicatorCollectives& communicator : summary) {
    TELLER_RETURN_IF_ERROR(DecodeCommunicator(&in, &communicator));
  }
  TELLER_RETURN_IF_ERROR(in.End());
  return summary;
}

}  // namespace teller::cause
