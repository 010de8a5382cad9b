#include "capture/capture_api.h"

#include <string>
#include <string_view>
#include <vector>

#include "capture/process_status.h"
#include "capture/session.h"

namespace {

using teller::capture::Session;
namespace wire = teller::wire;

wire::RangeLayer ToLayer(int layer) {
  return layer >= 0 && layer <= static_cast<int>(wire::RangeLayer::kOther)
             ? static_cast<wire::RangeLayer>(layer)
             : wire::RangeLayer::kUnspecified;
}

teller::capture::DomainId TellerDomain(Session* session) {
  static const teller::capture::DomainId domain = session->CreateDomain("teller");
  return domain;
}

}  // namespace

extern "C" {

int teller_capture_active(void) {
  Session* session = Session::Get();
  return session && !session->disabled() ? 1 : 0;
}

void teller_range_push(const char* name, int layer) {
  if (Session* session = Session::Get()) {
    session->Push(ToLayer(layer), TellerDomain(session), name ? name : "");
  }
}

void teller_range_pop(void) {
  if (Session* session = Session::Get()) session->Pop(TellerDomain(session));
}

void teller_host_range(int layer, const char* name, int64_t start_ns, int64_t end_ns, int64_t step,
                       const char* phase, const char* requests) {
  Session* session = Session::Get();
  if (!session || !session->ActiveOrReactivated()) return;
  wire::HostRangeRecord record;
  record.layer = ToLayer(layer);
  record.name = name ? name : "";
  record.start_ns = start_ns;
  record.end_ns = end_ns;
  std::vector<std::string_view> ids;
  std::vector<wire::Arg> args;
  if (step >= 0) {
    args.push_back(wire::Arg::Int(wire::kStepArgStep, step));
    if (phase && *phase) args.push_back(wire::Arg::String(wire::kStepArgPhase, phase));
    std::string_view list = requests ? requests : "";
    while (!list.empty()) {
      size_t end = list.find('\n');
      std::string_view id = list.substr(0, end);
      if (!id.empty()) ids.push_back(id);
      if (end == std::string_view::npos) break;
      list.remove_prefix(end + 1);
    }
    args.push_back(wire::Arg::StringList(wire::kStepArgRequests, ids));
  }
  record.args = args;
  session->EmitHostRange(record);
}

void teller_step_begin(void) {
  if (Session* session = Session::Get()) session->StepBegin();
}

void teller_process_group(int rank, int world_size) {
  if (Session* session = Session::Get()) session->SetProcessGroup(rank, world_size);
}

void teller_mark(const char* name) {
  if (Session* session = Session::Get()) session->Mark(TellerDomain(session), name ? name : "");
}

void teller_note(const char* line) {
  Session* session = Session::Get();
  if (session == nullptr || line == nullptr || *line == '\0') return;
  std::string text(line);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  session->AppendSideFile(teller::capture::kNotesFileName, text);
}

void teller_name_thread(const char* name) {
  if (Session* session = Session::Get())
    session->NameThread(Session::CurrentTid(), name ? name : "");
}

int64_t teller_monotonic_ns(void) { return teller::capture::MonotonicNs(); }

void teller_flush(void) {
  if (Session* session = Session::Get()) session->Flush();
}

void teller_shutdown(int exit_code) {
  if (Session* session = Session::Get()) session->Shutdown(exit_code);
}

}  // extern "C"
