// The floor for an NVTX tool: push stores the message pointer in a thread-local ring,
// pop moves an index. capture_nvtx_bench compares teller's injection against it.
#define NVTX_NO_IMPL  // a tool: types only, no NVTX implementation
#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace {

thread_local const char* ring[1024];
thread_local uint32_t top = 0;

int NVTX_API PushA(const char* message) {
  ring[top++ & 1023] = message;
  return 0;
}
int NVTX_API Pop() {
  --top;
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size))
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(PushA);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(Pop);
  return 1;
}
