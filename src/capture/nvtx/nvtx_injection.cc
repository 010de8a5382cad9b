// libteller_nvtx_injection.so: the NVTX tool teller record points NVTX_INJECTION64_PATH
// at. NVTX calls InitializeInjectionNvtx2 on the first NVTX call of the process; we
// fill the core and core2 callback tables with functions that forward to the
// process's capture::Session. Payloads and categories are not recorded.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "capture/capture_api.h"
#include "capture/session.h"

namespace teller::capture {
namespace {

Session* g_session = nullptr;  // set once in InitializeInjectionNvtx2, before any callback

// Wide strings of the W variants, as UTF-8.
std::string WideToUtf8(const wchar_t* text) {
  std::string out;
  for (; text && *text; ++text) {
    uint32_t c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

DomainId ToDomain(nvtxDomainHandle_t domain) {
  return static_cast<DomainId>(reinterpret_cast<uintptr_t>(domain));
}

// The message of an attribute struct; wide text goes through scratch.
std::string_view Message(const nvtxEventAttributes_t* attributes, std::string* scratch) {
  if (!attributes) return {};
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return attributes->message.ascii ? std::string_view(attributes->message.ascii)
                                       : std::string_view();
    case NVTX_MESSAGE_TYPE_UNICODE:
      *scratch = WideToUtf8(attributes->message.unicode);
      return *scratch;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      // Our RegisterString handles are pointers to stable C strings.
      return attributes->message.registered
                 ? std::string_view(reinterpret_cast<const char*>(attributes->message.registered))
                 : std::string_view();
    default:
      return {};
  }
}

// ---- core (default domain) ----

void NVTX_API MarkEx(const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  g_session->Mark(0, Message(attributes, &scratch));
}
void NVTX_API MarkA(const char* message) { g_session->Mark(0, message ? message : ""); }
void NVTX_API MarkW(const wchar_t* message) { g_session->Mark(0, WideToUtf8(message)); }

nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  return g_session->StartRange(wire::RangeLayer::kUnspecified, 0, Message(attributes, &scratch));
}
nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  return g_session->StartRange(wire::RangeLayer::kUnspecified, 0, message ? message : "");
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) {
  return g_session->StartRange(wire::RangeLayer::kUnspecified, 0, WideToUtf8(message));
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { g_session->EndRange(id, 0); }

int NVTX_API RangePushEx(const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  g_session->Push(wire::RangeLayer::kUnspecified, 0, Message(attributes, &scratch));
  return 0;
}
int NVTX_API RangePushA(const char* message) {
  g_session->Push(wire::RangeLayer::kUnspecified, 0, message ? message : "");
  return 0;
}
int NVTX_API RangePushW(const wchar_t* message) {
  g_session->Push(wire::RangeLayer::kUnspecified, 0, WideToUtf8(message));
  return 0;
}
int NVTX_API RangePop() {
  g_session->Pop(0);
  return 0;
}
void NVTX_API NameCategoryA(uint32_t, const char*) {}
void NVTX_API NameCategoryW(uint32_t, const wchar_t*) {}
void NVTX_API NameOsThreadA(uint32_t tid, const char* name) {
  g_session->NameThread(tid, name ? name : "");
}
void NVTX_API NameOsThreadW(uint32_t tid, const wchar_t* name) {
  g_session->NameThread(tid, WideToUtf8(name));
}

// ---- core2 (domains) ----

void NVTX_API DomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  g_session->Mark(ToDomain(domain), Message(attributes, &scratch));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  return g_session->StartRange(wire::RangeLayer::kUnspecified, ToDomain(domain),
                               Message(attributes, &scratch));
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  g_session->EndRange(id, ToDomain(domain));
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string scratch;
  g_session->Push(wire::RangeLayer::kUnspecified, ToDomain(domain), Message(attributes, &scratch));
  return 0;
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  g_session->Pop(ToDomain(domain));
  return 0;
}
nvtxResourceHandle_t NVTX_API DomainResourceCreate(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
  return nullptr;
}
void NVTX_API DomainResourceDestroy(nvtxResourceHandle_t) {}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t, uint32_t, const char*) {}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t, uint32_t, const wchar_t*) {}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* text) {
  return reinterpret_cast<nvtxStringHandle_t>(
      const_cast<char*>(g_session->RegisterString(text ? text : "")));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* text) {
  return reinterpret_cast<nvtxStringHandle_t>(
      const_cast<char*>(g_session->RegisterString(WideToUtf8(text))));
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(
      static_cast<uintptr_t>(g_session->CreateDomain(name ? name : "")));
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(
      static_cast<uintptr_t>(g_session->CreateDomain(WideToUtf8(name))));
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}
void NVTX_API Initialize(const void*) {}

template <typename F>
void Set(NvtxFunctionTable table, unsigned int size, unsigned int id, F function) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

bool FillTables(NvtxGetExportTableFunc_t get_export_table) {
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable) {
    return false;
  }
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) {
    return false;
  }
  Set(table, size, NVTX_CBID_CORE_MarkEx, MarkEx);
  Set(table, size, NVTX_CBID_CORE_MarkA, MarkA);
  Set(table, size, NVTX_CBID_CORE_MarkW, MarkW);
  Set(table, size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  Set(table, size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  Set(table, size, NVTX_CBID_CORE_RangeStartW, RangeStartW);
  Set(table, size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  Set(table, size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  Set(table, size, NVTX_CBID_CORE_RangePushA, RangePushA);
  Set(table, size, NVTX_CBID_CORE_RangePushW, RangePushW);
  Set(table, size, NVTX_CBID_CORE_RangePop, RangePop);
  Set(table, size, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
  Set(table, size, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
  Set(table, size, NVTX_CBID_CORE_NameOsThreadA, NameOsThreadA);
  Set(table, size, NVTX_CBID_CORE_NameOsThreadW, NameOsThreadW);
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) && table) {
    Set(table, size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
    Set(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
    Set(table, size, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
    Set(table, size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
    Set(table, size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
    Set(table, size, NVTX_CBID_CORE2_DomainResourceCreate, DomainResourceCreate);
    Set(table, size, NVTX_CBID_CORE2_DomainResourceDestroy, DomainResourceDestroy);
    Set(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
    Set(table, size, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
    Set(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
    Set(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
    Set(table, size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
    Set(table, size, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
    Set(table, size, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
    Set(table, size, NVTX_CBID_CORE2_Initialize, Initialize);
  }
  return true;
}

}  // namespace
}  // namespace teller::capture

// Returning 0 tells NVTX to stay a no-op; we never fail the host program.
// Called once per NVTX instance in the process (each library that embeds nvtx3 has
// its own tables). Returning 0 tells NVTX to stay a no-op; we never fail the host.
extern "C" TELLER_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  using teller::capture::Session;
  Session* session = Session::Get();  // logs once why it cannot trace
  if (!session || !get_export_table) return 0;
  teller::capture::g_session = session;
  if (!teller::capture::FillTables(get_export_table)) {
    session->Disable(teller::base::Internal("NVTX export table not understood"));
    return 0;
  }
  return 1;
}
