#include "cause/hang_summary_wire.h"

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kCollectivesMagic = "TLHC";
// The fewest bytes a communicator and a member take (their strings empty).
constexpr size_t kCommunicatorBytes = 3 * sizeof(uint64_t);
constexpr size_t kMemberBytes = sizeof(int32_t) + 5 * sizeof(int64_t);

// A u64 count of items, each at least `least_bytes` (the count checked against the bytes
// left), then each item by `decode_one`.
template <typename T, typename DecodeOne>
base::Status DecodeCounted(base::WireReader* in, std::string_view items_name, size_t least_bytes,
                           std::vector<T>* items, DecodeOne decode_one) {
  uint64_t count = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&count, fmt::format("the number of {}", items_name)));
  if (count > in->left() / least_bytes) {
    return in->Bad(fmt::format("{} {}, more than the {} bytes left hold", count, items_name,
                               in->left()));
  }
  items->resize(count);
  for (T& item : *items) TELLER_RETURN_IF_ERROR(decode_one(&item));
  return base::OkStatus();
}

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
  int32_t previous_rank = -1;
  return DecodeCounted(in, "members", kMemberBytes, &communicator->members,
                       [&](CollectiveMember* member) {
                         TELLER_RETURN_IF_ERROR(DecodeMember(in, previous_rank, member));
                         previous_rank = member->rank;
                         return base::OkStatus();
                       });
}

constexpr std::string_view kProbesMagic = "TLHP";
constexpr std::string_view kStatesMagic = "TLHS";
constexpr size_t kProbeBytes = sizeof(int32_t) + sizeof(int64_t);
// The fewest bytes a state takes: its rank, four flags and the pending count.
constexpr size_t kStateBytes = sizeof(int32_t) + 4 + sizeof(uint32_t);

void EncodePending(const PendingLaunches& pending, base::WireWriter* out) {
  out->Value<uint32_t>(pending.count);
  out->String(pending.last_call);
  out->Value<int64_t>(pending.last_ns);
  out->Value<int64_t>(pending.before_end_ns);
}

void EncodeState(const CulpritStatePart& s, base::WireWriter* out) {
  out->Value<int32_t>(s.rank);
  out->Value<uint8_t>(s.has_kernel ? 1 : 0);
  if (s.has_kernel) {
    out->String(s.last_kernel);
    out->Value<int64_t>(s.last_kernel_end_ns);
  }
  out->Value<uint8_t>(s.has_runtime_call ? 1 : 0);
  if (s.has_runtime_call) {
    out->String(s.last_runtime_call);
    out->Value<int64_t>(s.last_runtime_call_ns);
  }
  out->Value<uint8_t>(s.has_range ? 1 : 0);
  if (s.has_range) {
    out->String(s.range);
    out->Value<int64_t>(s.range_start_ns);
    out->Value<int64_t>(s.range_end_ns);
  }
  out->Value<uint8_t>(s.has_process ? 1 : 0);
  EncodePending(s.pending, out);
}

base::Status DecodeNamed(base::WireReader* in, std::string_view what, std::string* name) {
  std::string_view text;
  TELLER_RETURN_IF_ERROR(in->String(what, &text));
  *name = std::string(text);
  return base::OkStatus();
}

base::Status DecodePending(base::WireReader* in, PendingLaunches* pending) {
  TELLER_RETURN_IF_ERROR(in->Value(&pending->count, "the pending launches' count"));
  TELLER_RETURN_IF_ERROR(DecodeNamed(in, "the last pending launch", &pending->last_call));
  TELLER_RETURN_IF_ERROR(in->Value(&pending->last_ns, "the last pending launch's time"));
  return in->Value(&pending->before_end_ns, "the last pending launch's distance to the end");
}

base::Status DecodeState(base::WireReader* in, CulpritStatePart* s) {
  TELLER_RETURN_IF_ERROR(in->Value(&s->rank, "a culprit's rank"));
  TELLER_RETURN_IF_ERROR(in->Flag(&s->has_kernel, "whether it has a kernel"));
  if (s->has_kernel) {
    TELLER_RETURN_IF_ERROR(DecodeNamed(in, "its last kernel", &s->last_kernel));
    TELLER_RETURN_IF_ERROR(in->Value(&s->last_kernel_end_ns, "its last kernel's end"));
  }
  TELLER_RETURN_IF_ERROR(in->Flag(&s->has_runtime_call, "whether it has a runtime call"));
  if (s->has_runtime_call) {
    TELLER_RETURN_IF_ERROR(DecodeNamed(in, "its last runtime call", &s->last_runtime_call));
    TELLER_RETURN_IF_ERROR(in->Value(&s->last_runtime_call_ns, "its last runtime call's start"));
  }
  TELLER_RETURN_IF_ERROR(in->Flag(&s->has_range, "whether it has a range"));
  if (s->has_range) {
    TELLER_RETURN_IF_ERROR(DecodeNamed(in, "its open range", &s->range));
    TELLER_RETURN_IF_ERROR(in->Value(&s->range_start_ns, "its range's start"));
    TELLER_RETURN_IF_ERROR(in->Value(&s->range_end_ns, "its range's end"));
  }
  TELLER_RETURN_IF_ERROR(in->Flag(&s->has_process, "whether it has a process"));
  return DecodePending(in, &s->pending);
}

// A threshold of the query, refused when negative (or not a number).
template <typename T>
base::Status DecodeThreshold(base::WireReader* in, std::string_view what, T* threshold) {
  TELLER_RETURN_IF_ERROR(in->Value(threshold, what));
  if (!(*threshold >= 0)) return in->Bad(fmt::format("{} is {}, at least 0 expected", what, *threshold));
  return base::OkStatus();
}

constexpr std::string_view kStalledMagic = "TLST";
// The fewest bytes a stalled step takes (its strings empty).
constexpr size_t kStalledStepBytes =
    sizeof(int32_t) + 2 * sizeof(uint32_t) + 6 * sizeof(int64_t) + 4 * sizeof(uint64_t);

void EncodeStalledStep(const StalledStep& step, base::WireWriter* out) {
  out->Value<int32_t>(step.rank);
  out->Value<int64_t>(step.pid);
  out->String(step.name);
  out->Value<int64_t>(step.start_ns);
  out->Value<int64_t>(step.open_ns);
  out->Value<int64_t>(step.longest_before_ns);
  out->Value<uint32_t>(step.steps_before);
  EncodePending(step.pending, out);
  out->String(step.waits_in);
  out->String(step.innermost_open);
}

base::Status DecodeStalledStep(base::WireReader* in, StalledStep* step) {
  TELLER_RETURN_IF_ERROR(in->Value(&step->rank, "a stalled step's rank"));
  TELLER_RETURN_IF_ERROR(in->Value(&step->pid, "its pid"));
  TELLER_RETURN_IF_ERROR(DecodeNamed(in, "its name", &step->name));
  TELLER_RETURN_IF_ERROR(in->Value(&step->start_ns, "its start"));
  TELLER_RETURN_IF_ERROR(in->Value(&step->open_ns, "its open time"));
  if (step->open_ns < 0) {
    return in->Bad(fmt::format("open {} ns, at least 0 expected", step->open_ns));
  }
  TELLER_RETURN_IF_ERROR(in->Value(&step->longest_before_ns, "its longest step before"));
  TELLER_RETURN_IF_ERROR(in->Value(&step->steps_before, "its steps before"));
  TELLER_RETURN_IF_ERROR(DecodePending(in, &step->pending));
  TELLER_RETURN_IF_ERROR(DecodeNamed(in, "the collective it waits in", &step->waits_in));
  return DecodeNamed(in, "its innermost open range", &step->innermost_open);
}

}  // namespace

HangQuery QueryWithOptions(std::vector<CulpritProbe> probes, const HangOptions& options) {
  return {std::move(probes), options.min_pending_launch_ns, options.min_stalled_ns,
          options.min_stalled_ratio, options.min_steps_before};
}

HangOptions OptionsOfQuery(const HangQuery& query) {
  HangOptions options;
  options.min_pending_launch_ns = query.min_pending_launch_ns;
  options.min_stalled_ns = query.min_stalled_ns;
  options.min_stalled_ratio = query.min_stalled_ratio;
  options.min_steps_before = query.min_steps_before;
  return options;
}

std::string EncodeHangQuery(const HangQuery& query) {
  base::WireWriter out(kProbesMagic, kCulpritStatesWireVersion);
  out.Value<int64_t>(query.min_pending_launch_ns);
  out.Value<int64_t>(query.min_stalled_ns);
  out.Value<double>(query.min_stalled_ratio);
  out.Value<uint32_t>(query.min_steps_before);
  out.Value<uint64_t>(query.probes.size());
  for (const CulpritProbe& probe : query.probes) {
    out.Value<int32_t>(probe.rank);
    out.Value<int64_t>(probe.since_ns);
  }
  return out.Take();
}

base::StatusOr<HangQuery> DecodeHangQuery(std::string_view bytes) {
  static const std::string kWhat = "hang culprits";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kProbesMagic, kCulpritStatesWireVersion));
  HangQuery query;
  TELLER_RETURN_IF_ERROR(in.Value(&query.min_pending_launch_ns, "the pending launches' threshold"));
  TELLER_RETURN_IF_ERROR(
      DecodeThreshold(&in, "the stalled steps' least time", &query.min_stalled_ns));
  TELLER_RETURN_IF_ERROR(
      DecodeThreshold(&in, "the stalled steps' least ratio", &query.min_stalled_ratio));
  TELLER_RETURN_IF_ERROR(
      in.Value(&query.min_steps_before, "the stalled steps' least steps before"));
  int32_t previous_rank = -1;
  TELLER_RETURN_IF_ERROR(
      DecodeCounted(&in, "culprits", kProbeBytes, &query.probes, [&](CulpritProbe* probe) {
        TELLER_RETURN_IF_ERROR(in.Value(&probe->rank, "a culprit's rank"));
        if (probe->rank <= previous_rank) {
          return in.Bad(fmt::format("rank {}, above {} expected (culprits go by rank)",
                                    probe->rank, previous_rank));
        }
        previous_rank = probe->rank;
        return in.Value(&probe->since_ns, "a culprit's since");
      }));
  TELLER_RETURN_IF_ERROR(in.End());
  return query;
}

std::string EncodeCulpritStatesPart(const CulpritStatesPart& part) {
  base::WireWriter out(kStatesMagic, kCulpritStatesWireVersion);
  out.Value<int64_t>(part.events_end_ns);
  out.Value<uint64_t>(part.states.size());
  for (const CulpritStatePart& state : part.states) EncodeState(state, &out);
  return out.Take();
}

base::StatusOr<CulpritStatesPart> DecodeCulpritStatesPart(std::string_view bytes) {
  static const std::string kWhat = "culprits' states";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kStatesMagic, kCulpritStatesWireVersion));
  CulpritStatesPart part;
  TELLER_RETURN_IF_ERROR(in.Value(&part.events_end_ns, "the events' last end"));
  TELLER_RETURN_IF_ERROR(DecodeCounted(&in, "states", kStateBytes, &part.states,
                                       [&](CulpritStatePart* state) { return DecodeState(&in, state); }));
  TELLER_RETURN_IF_ERROR(in.End());
  return part;
}

std::string EncodeStalledSteps(const std::vector<StalledStep>& steps) {
  base::WireWriter out(kStalledMagic, kStalledStepsWireVersion);
  out.Value<uint64_t>(steps.size());
  for (const StalledStep& step : steps) EncodeStalledStep(step, &out);
  return out.Take();
}

base::StatusOr<std::vector<StalledStep>> DecodeStalledSteps(std::string_view bytes) {
  static const std::string kWhat = "stalled steps";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kStalledMagic, kStalledStepsWireVersion));
  std::vector<StalledStep> steps;
  TELLER_RETURN_IF_ERROR(DecodeCounted(&in, "stalled steps", kStalledStepBytes, &steps,
                                       [&](StalledStep* step) { return DecodeStalledStep(&in, step); }));
  TELLER_RETURN_IF_ERROR(in.End());
  return steps;
}

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
  CollectiveSummary summary;
  TELLER_RETURN_IF_ERROR(DecodeCounted(&in, "communicators", kCommunicatorBytes, &summary,
                                       [&](CommunicatorCollectives* communicator) {
                                         return DecodeCommunicator(&in, communicator);
                                       }));
  TELLER_RETURN_IF_ERROR(in.End());
  return summary;
}

}  // namespace teller::cause
