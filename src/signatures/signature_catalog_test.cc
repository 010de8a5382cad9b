#include "signatures/signature_catalog.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "signatures/built_in_catalog.h"

namespace teller::signatures {
namespace {

using wire::SignatureEntry;
using wire::SignatureRole;

SignatureEntry Entry(std::string id, std::vector<std::string> patterns,
                     model::FaultCategory category) {
  SignatureEntry entry;
  entry.id = std::move(id);
  entry.patterns = std::move(patterns);
  entry.category = category;
  entry.meaning = "m";
  entry.next_action = "n";
  entry.source.url = "u";
  return entry;
}

TEST(SignatureCatalogTest, StarMatchesAnyRunAndCaseIsIgnored) {
  EXPECT_TRUE(PiecesOccurInOrder("xid (pci:0000:3b:00): 79, pid=1", {"xid (", "): 79,"}));
  EXPECT_FALSE(PiecesOccurInOrder("): 79, xid (", {"xid (", "): 79,"}));
  SignatureCatalog catalog;
  wire::SignatureCatalogFile file;
  file.entries.push_back(
      Entry("xid.79", {"NVRM: Xid (*): 79,"}, model::FaultCategory::kRuntimeDriver));
  ASSERT_TRUE(catalog.Add(file, "a.json").ok());
  EXPECT_TRUE(catalog.Match("[ 12.3] nvrm: XID (PCI:0000:3b:00): 79, pid=7, GPU has fallen off"));
  EXPECT_FALSE(catalog.Match("[ 12.3] NVRM: Xid (PCI:0000:3b:00): 13, pid=7"));
  EXPECT_FALSE(catalog.Match(""));
}

TEST(SignatureCatalogTest, TheMostSpecificPatternWinsAndUserFilesOverrideById) {
  wire::SignatureCatalogFile file;
  file.entries.push_back(
      Entry("nccl.generic", {"NCCL WARN"}, model::FaultCategory::kCommunicationNetwork));
  file.entries.push_back(Entry("nccl.shm", {"NCCL WARN Error while creating shared memory segment"},
                               model::FaultCategory::kMemoryResource));
  SignatureCatalog catalog;
  ASSERT_TRUE(catalog.Add(file, "built-in").ok());
  auto match =
      catalog.Match("host:1:2 [0] NCCL WARN Error while creating shared memory segment /dev/shm");
  ASSERT_TRUE(match);
  EXPECT_EQ(match.signature->entry.id, "nccl.shm");
  EXPECT_EQ(catalog.Match("host:1:2 [0] NCCL WARN NET/IB : x").signature->entry.id, "nccl.generic");

  wire::SignatureCatalogFile user;
  user.entries.push_back(
      Entry("nccl.generic", {"NCCL WARN"}, model::FaultCategory::kRuntimeDriver));
  ASSERT_TRUE(catalog.Add(user, "mine.json").ok());
  EXPECT_EQ(catalog.size(), 2u);
  match = catalog.Match("NCCL WARN something");
  EXPECT_EQ(match.signature->entry.category, model::FaultCategory::kRuntimeDriver);
  EXPECT_EQ(match.signature->origin, "mine.json");

  wire::SignatureCatalogFile twice;
  twice.entries.push_back(Entry("dup", {"abc"}, model::FaultCategory::kCudaKernel));
  twice.entries.push_back(Entry("dup", {"def"}, model::FaultCategory::kCudaKernel));
  EXPECT_FALSE(catalog.Add(twice, "bad.json").ok());
}

// A line as the program prints it: the pattern with its variable parts filled in.
std::string LineOf(const std::string& pattern) {
  std::string line = "prefix ";
  for (char c : pattern) line += (c == '*') ? std::string("7") : std::string(1, c);
  return line + " suffix";
}

TEST(BuiltInCatalogTest, EveryFileParsesAndEveryEntryCitesItsSource) {
  auto catalog = BuiltInCatalog();
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_GE(BuiltInCatalogFiles().size(), 5u);
  ASSERT_GE((*catalog)->size(), 200u);
  std::set<std::string> ids;
  for (const Signature& signature : (*catalog)->signatures()) {
    const SignatureEntry& entry = signature.entry;
    EXPECT_TRUE(ids.insert(entry.id).second) << "id twice across files: " << entry.id;
    const bool cites_line = !entry.source.repo.empty() && entry.source.line > 0;
    EXPECT_TRUE(cites_line || !entry.source.url.empty()) << entry.id;
    for (const std::string& pattern : entry.patterns) {
      size_t literal = 0;
      for (char c : pattern) literal += c != '*';
      EXPECT_GE(literal, 8u) << entry.id << ": pattern too short to be specific: " << pattern;
    }
  }
}

// Each pattern, filled in, is matched by an entry of the same category: no entry is
// shadowed by a more specific one that says something else.
TEST(BuiltInCatalogTest, EachPatternFilledInIsReadAsItsOwnCategory) {
  auto catalog = BuiltInCatalog();
  ASSERT_TRUE(catalog.ok());
  std::map<std::string, std::string> shadowed;
  for (const Signature& signature : (*catalog)->signatures()) {
    for (const std::string& pattern : signature.entry.patterns) {
      SignatureMatch match = (*catalog)->Match(LineOf(pattern));
      ASSERT_TRUE(match) << signature.entry.id << ": " << pattern;
      const SignatureEntry& got = match.signature->entry;
      const bool same =
          got.category == signature.entry.category &&
          (got.role == SignatureRole::kBenign) == (signature.entry.role == SignatureRole::kBenign);
      if (!same) shadowed[signature.entry.id + " (" + pattern + ")"] = got.id;
    }
  }
  for (const auto& [entry, by] : shadowed) ADD_FAILURE() << entry << " is read as " << by;
}

// Each signature added for issue 42 item 5 fires on a line as the software printed it
// (copied from a public thread) and stays silent on a near-miss of the same words.
TEST(BuiltInCatalogTest, NewSignaturesFireOnRealLinesAndNotOnNearMisses) {
  auto catalog = BuiltInCatalog();
  ASSERT_TRUE(catalog.ok());
  struct Case {
    const char* id;
    const char* real;
    const char* near_miss;
  };
  const Case cases[] = {
      {"ray.memory_monitor.task_killed",
       "ERROR 03-21 17:27:44 [core.py:340] ray.exceptions.OutOfMemoryError: Task was killed due to "
       "the node running low on memory.",
       "Task was killed due to the user pressing Ctrl-C"},
      {"ray.raylet.workers_killed_oom",
       "(raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure "
       "(OOM), 0 Workers crashed due to other reasons at node",
       "0 Workers (tasks / actors) killed"},
      {"ray.object_store_full",
       "ray.exceptions.ObjectStoreFullError: Failed to put object ffff0f00000003000000 in object "
       "store because it is full. Object size is 516884584 bytes.",
       "Failed to put object in the queue"},
      {"ray.out_of_disk", "ray.exceptions.OutOfDiskError: Local disk is full",
       "Local disk is fine"},
      {"ray.gcs.connect_failed",
       "[2025-06-13 01:49:41,730 E 1 1] gcs_rpc_client.h:179: Failed to connect to GCS at address "
       "10.108.0.184:6379 within 5 seconds.",
       "Connected to GCS at address 10.108.0.184:6379"},
      {"ray.node_marked_dead",
       "The node with node id: 75b2eec8 and ip: 10.4.4.107 has been marked dead because the "
       "detector has missed too many heartbeats from it.",
       "The node has been marked alive"},
      {"ray.actor_died",
       "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
       "The actor finished this task."},
      {"container.nvidia_cli.cuda_requirement",
       "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update "
       "your driver to a newer version, or use an earlier cuda container: unknown",
       "nvidia-container-cli: requirement satisfied"},
      {"container.docker.no_gpu_device_driver",
       "docker: Error response from daemon: could not select device driver \"\" with "
       "capabilities: [[gpu]].",
       "selected device driver nvidia with capabilities"},
      {"container.nvidia_cli.nvml_load_failed",
       "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
       "cannot open shared object file: no such file or directory: unknown",
       "nvidia-container-cli: initialization done"},
      {"k8s.device_plugin.nvml_init_failed",
       "2020/10/14 18:04:53 Failed to initialize NVML: could not load NVML library.",
       "2020/10/14 18:04:53 Loading NVML"},
      {"triton.compilation_error",
       "ERROR 02-23 02:23:19 [core.py:948] triton.compiler.errors.CompilationError: at 22:25:",
       "triton.compiler compiled the kernel"},
      {"triton.passmanager_failed", "RuntimeError: PassManager::run failed",
       "PassManager::run succeeded"},
      {"nccl.ib.async_event_legacy",
       "...-48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port "
       "error",
       "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB"},
      {"nccl.ib.async_catastrophic",
       "[0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
       "local error"},
      {"nccl.ib.collective_mismatch",
       "[0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> "
       "collective mismatch error, local size 496640 remote size 65536",
       "NCCL INFO collective size 496640"},
      {"nccl.coll.mismatched_collective",
       "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls "
       "at and around rank 39.",
       "NCCL INFO collective calls at rank 39"},
      {"nccl.ib.reg_mr_enomem",
       "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate "
       "memory",
       "NCCL INFO ibv_reg_mr_iova2 registered 4 MB"},
      {"nvidia.smi.no_driver",
       "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
       "that the latest NVIDIA driver is installed and running.",
       "NVIDIA-SMI 550.54.14 Driver Version: 550.54.14"},
      {"linux.modprobe.nvidia_missing", "modprobe: FATAL: Module nvidia not found.",
       "modprobe: loaded module nvidia"},
      {"nvidia.nvrm.api_mismatch",
       "kernel: NVRM: API mismatch: the client has the version 367.44, but",
       "NVRM: loading NVIDIA UNIX x86_64 Kernel Module 367.44"},
      {"nvidia.probe_not_called",
       "[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).",
       "[188549.976351] NVRM: loading NVIDIA UNIX Kernel Module"},
      {"nvidia.gsp.rpc_timeout_dump",
       "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP "
       "Timeout "
       "**********************************",
       "NVRM: GPU6 GSP firmware loaded"},
      {"pytorch.cuda.fork_reinit",
       "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
       "multiprocessing, you must use the 'spawn' start method",
       "Initialized CUDA in the spawned subprocess"},
      {"sglang.retract_no_space_one_request",
       "AssertionError: No space left for only one request, "
       "self.token_to_kv_pool_allocator.available_size()=0",
       "Space left for 12 requests"},
      {"trtllm.paged_kv_too_small",
       "[TensorRT-LLM][ERROR] maxTokensInPagedKvCache must be large enough to process at least 1 "
       "sequence to completion (i.e. must be larger than beam_width * tokensPerBlock * "
       "maxBlocksPerSeq)",
       "[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache."},
      {"pytorch.device_assert.index_out_of_bounds",
       "IndexKernel.cu:142: operator(): block: [0,0,0], thread: [44,0,0] Assertion index >= "
       "-sizes[i] && index < sizes[i] && \"index out of bounds\" failed.",
       "index within bounds"},
  };
  for (const Case& c : cases) {
    SignatureMatch match = (*catalog)->Match(c.real);
    ASSERT_TRUE(match) << c.id << " did not fire on: " << c.real;
    EXPECT_EQ(match.signature->entry.id, c.id) << c.real;
    SignatureMatch miss = (*catalog)->Match(c.near_miss);
    EXPECT_TRUE(!miss || miss.signature->entry.id != c.id) << c.id << " fired on: " << c.near_miss;
  }
}

}  // namespace
}  // namespace teller::signatures
