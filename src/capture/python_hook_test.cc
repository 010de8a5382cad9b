// The Python hooks (python/teller_hook) on fake engines with the real engines'
// qualified names (tests/data/fake_engines): ranges, STEP args, and that nothing
// breaks when a target is missing or the library is absent.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "capture/capture_test_util.h"
#include "capture/process_status.h"
#include "wire/bundle_writer.h"

namespace teller::capture {
namespace {

using testing::DumpBundle;
using testing::DumpedBundle;
using testing::RunProgram;
using testing::RunResult;

std::string Python() {
  for (const char* path : {"/usr/bin/python3", "/usr/local/bin/python3"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

std::string MakeBundle(const std::string& name) {
  std::string dir = base::TempDir(name) + "/run.teller";
  auto writer = wire::BundleWriter::Create(dir, wire::BundleMeta{});
  EXPECT_TRUE(writer.ok());
  return dir;
}

std::vector<std::string> HookEnv(const std::string& bundle) {
  const std::string source = base::SourceDir();
  return {"TELLER_OUTPUT_DIR=" + bundle, "PYTHONDONTWRITEBYTECODE=1",
          "TELLER_CAPTURE_LIB=" TELLER_CAPTURE_LIBRARY,
          "TELLER_PYTHON_HOOKS=" + source + "/tests/data/hook_engines_hooks.txt",
          "PYTHONPATH=" + source + "/python/teller_hook:" + source +
              "/tests/data/fake_engines/chained_site"};
}

const char* kExpectedOutput =
    "v1 [2, 2, 3]\nworker 2\nv0 ['r0'] ['r0', 'r1']\nv0 raised nothing to run\nsglang 2 1\n"
    "queue [None, {'tokens': 1}, {'tokens': 2}]\nmrv2 1\nv0 async ['x0']\nsglang 0.3 3 3\n"
    "torch 2 5\nsite yes\n";

// "LAYER name step=.. phase=.. requests=.." per host range, in emission order.
std::vector<std::string> Describe(const testing::DumpedProcess& process, int64_t tid) {
  static const char* kLayers[] = {"?", "STEP", "FE", "BE", "RT", "DRV", "K", "MEM", "COMM"};
  std::vector<std::string> out;
  for (const auto& range : process.host_ranges) {
    if (range.tid != tid) continue;
    std::string text = std::string(kLayers[range.layer]) + " " + range.name;
    for (const char* key : {"step", "phase", "requests"}) {
      auto it = range.args.find(key);
      if (it != range.args.end()) text += std::string(" ") + key + "=" + it->second;
    }
    EXPECT_LE(range.start_ns, range.end_ns) << text;
    out.push_back(text);
  }
  return out;
}

TEST(PythonHookTest, EngineStepsCarryStepPhaseAndRequests) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  std::string bundle = MakeBundle("python_hooks");
  RunResult run =
      RunProgram({python, base::SourceDir() + "/tests/data/hook_engines.py"}, HookEnv(bundle));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The program's own output is unchanged, the bad hook line is reported once.
  EXPECT_NE(run.output.find(kExpectedOutput), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("hook_engines_hooks.txt:6: expected [?]module:qualname:LAYER"),
            std::string::npos);
  EXPECT_NE(run.output.find("wrapped 13\n"), std::string::npos) << run.output;
  // A target of an imported module that is missing is said once, on stderr and in the
  // process's notes; a module never imported stays silent.
  const std::string miss =
      "hook vllm.v1.engine.core:EngineCore.no_such_method did not attach: module imported, "
      "EngineCore has no attribute 'no_such_method'";
  EXPECT_NE(run.output.find("teller: " + miss + "\n"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("no.such.module"), std::string::npos) << run.output;
  std::string notes;
  for (const auto& entry : std::filesystem::directory_iterator(bundle)) {
    if (entry.path().filename().string().rfind("proc-", 0) != 0) continue;
    std::ifstream in(entry.path() / kNotesFileName);
    notes += std::string(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(notes, miss + "\n");

  DumpedBundle dump = DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 1u);
  const testing::DumpedProcess& process = dump.processes[0];
  const int64_t main_tid = process.pid;
  EXPECT_EQ(Describe(process, main_tid),
            (std::vector<std::string>{
                // vLLM v1: schedule, the in-process model runner and update_from_output
                // nest in the step.
                "FE Scheduler.schedule", "FE GPUModelRunner.execute_model",
                "FE Scheduler.update_from_output",
                "STEP EngineCore.step step=0 phase=prefill requests=a,b", "FE Scheduler.schedule",
                "FE GPUModelRunner.execute_model", "FE Scheduler.update_from_output",
                "STEP EngineCore.step step=1 phase=decode requests=a,b", "FE Scheduler.schedule",
                "FE GPUModelRunner.execute_model", "FE Scheduler.update_from_output",
                "STEP EngineCore.step step=2 phase=mixed requests=c,a,b",
                // A worker's execute_model is the step there. Step indices count the
                // process's steps, whichever function ran them.
                "STEP GPUModelRunner.execute_model step=3 phase=decode requests=w1,w2",
                // vLLM v0, including the step that raised.
                "FE Scheduler.schedule", "STEP LLMEngine.step step=4 phase=prefill requests=r0",
                "FE Scheduler.schedule", "STEP LLMEngine.step step=5 phase=mixed requests=r0,r1",
                "FE Scheduler.schedule", "STEP LLMEngine.step step=6 requests=",
                // SGLang, positional and keyword batch.
                "STEP Scheduler.run_batch step=7 phase=prefill requests=s1,s2",
                "STEP Scheduler.run_batch step=8 phase=decode requests=s1",
                // vLLM v1 with a batch queue: a step that only scheduled carries that
                // batch; one that finished an earlier batch carries the finished one.
                "FE Scheduler.schedule", "FE GPUModelRunner.execute_model",
                "STEP EngineCore.step_with_batch_queue step=9 phase=prefill requests=q1",
                "FE Scheduler.schedule", "FE GPUModelRunner.execute_model",
                "FE Scheduler.update_from_output",
                "STEP EngineCore.step_with_batch_queue step=10 phase=prefill requests=q1",
                "FE Scheduler.update_from_output",
                "STEP EngineCore.step_with_batch_queue step=11 phase=mixed requests=q2,q1",
                // Model Runner V2: the warm-up run is no step.
                "FE GPUModelRunner.execute_model",
                "STEP GPUModelRunner.execute_model step=12 phase=prefill requests=n1",
                // vLLM 0.6's coroutine step.
                "FE Scheduler.schedule",
                "STEP _AsyncLLMEngine.step_async step=13 phase=prefill requests=x0",
                // SGLang before 0.3.3: prefill, mixed prefill, decode.
                "STEP ModelTpServer.forward_prefill_batch step=14 phase=prefill requests=p1,p2",
                "STEP ModelTpServer.forward_prefill_batch step=15 phase=mixed requests=p3,p1,p2",
                "STEP ModelTpServer.forward_decode_batch step=16 phase=decode requests=p3,p1,p2",
                // torch: only the chosen module class.
                "BE Linear"}));
  // The thread's range sits on its own thread, which carries its Python name.
  int64_t worker_tid = 0;
  for (const auto& [tid, name] : process.thread_names) {
    if (name == "hook-worker") worker_tid = tid;
  }
  ASSERT_NE(worker_tid, 0);
  EXPECT_EQ(
      Describe(process, worker_tid),
      (std::vector<std::string>{"STEP Scheduler.run_batch step=17 phase=decode requests=t1"}));
  EXPECT_EQ(process.exit.kind, ExitKind::kExit);
}

TEST(PythonHookTest, WithoutTheLibraryNothingIsInstalledAndTheProgramRuns) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  std::string bundle = MakeBundle("python_hooks_nolib");
  std::vector<std::string> env = HookEnv(bundle);
  env[2] = "TELLER_CAPTURE_LIB=";
  RunResult run = RunProgram({python, base::SourceDir() + "/tests/data/hook_engines.py"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(kExpectedOutput), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("wrapped 0\n"), std::string::npos) << run.output;
  EXPECT_TRUE(DumpBundle(bundle).processes.empty());
}

TEST(PythonHookTest, MultiprocessingChildrenGetTheirOwnProcessFolders) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  std::string bundle = MakeBundle("python_hooks_mp");
  const std::string script =
      "import multiprocessing as mp, sys\n"
      "sys.path.insert(0, '" +
      base::SourceDir() +
      "/tests/data/fake_engines')\n"
      "from sglang.srt.managers.scheduler import Scheduler, ScheduleBatch, ForwardMode\n"
      "def work(i):\n"
      "    Scheduler().run_batch(ScheduleBatch(['m%d' % i], ForwardMode.DECODE))\n"
      "if __name__ == '__main__':\n"
      "    for method in ('fork', 'spawn'):\n"
      "        p = mp.get_context(method).Process(target=work, args=(len(method),))\n"
      "        p.start(); p.join()\n"
      "        print(method, p.exitcode)\n";
  const std::string script_path = base::TempDir("python_hooks_mp_script") + "/mp_main.py";
  std::ofstream(script_path) << script;
  RunResult run = RunProgram({python, script_path}, HookEnv(bundle));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fork 0\nspawn 0\n"), std::string::npos) << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  std::vector<std::string> requests;
  for (const auto& process : dump.processes) {
    for (const auto& range : process.host_ranges) requests.push_back(range.args.at("requests"));
    EXPECT_EQ(process.exit.kind, ExitKind::kExit) << process.dir;
  }
  std::sort(requests.begin(), requests.end());
  // fork child (m4) flushed through the os._exit hook; spawn child (m5) at exit.
  EXPECT_EQ(requests, (std::vector<std::string>{"m4", "m5"}));
}

TEST(PythonHookTest, ClassesOfTheLaunchedScriptAttach) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  std::string bundle = MakeBundle("python_hooks_main");
  const std::string dir = base::TempDir("python_hooks_main_script");
  std::ofstream(dir + "/hooks.txt") << "__main__:MyEngine.step:STEP:generic_batch\n"
                                       "__main__:NeverDefined.step:STEP\n";
  std::ofstream(dir + "/engine_main.py")
      << "class Batch:\n"
         "    def __init__(self, ids):\n"
         "        self.request_ids, self.phase = ids, 'prefill'\n"
         "class MyEngine:\n"
         "    def step(self, batch):\n"
         "        return len(batch.request_ids)\n"
         "print('steps', MyEngine().step(Batch(['x1', 'x2'])), MyEngine().step(Batch(['x3'])))\n";
  std::vector<std::string> env = HookEnv(bundle);
  env[3] = "TELLER_PYTHON_HOOKS=" + dir + "/hooks.txt";
  RunResult run = RunProgram({python, dir + "/engine_main.py"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("steps 2 1\n"), std::string::npos) << run.output;
  // The class never defined is said at exit, with what to do.
  EXPECT_NE(run.output.find("teller: hook __main__:NeverDefined.step did not attach: module "
                            "imported, module has no attribute 'NeverDefined' (a class of the "
                            "launched script"),
            std::string::npos)
      << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_EQ(Describe(dump.processes[0], dump.processes[0].pid),
            (std::vector<std::string>{"STEP MyEngine.step step=0 phase=prefill requests=x1,x2",
                                      "STEP MyEngine.step step=1 phase=prefill requests=x3"}));
}

// The environment with every launcher's rank variable empty (counted as unset): the
// test's own may hold some (CI under srun).
std::vector<std::string> WithoutLauncherRanks(std::vector<std::string> env) {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_RANK",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}) {
    env.push_back(std::string(name) + "=");
  }
  return env;
}

// Ranks (docs/capture.md, "Ranks"): a process without a launcher variable takes the
// rank its process group reports after init_process_group (the fake torch.distributed
// of tests/data/fake_engines), restated once; a launcher's rank names its variable.
TEST(PythonHookTest, TheProcessGroupSaysTheRankOfAProcessNoLauncherRanked) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  const std::string script =
      "import sys\n"
      "sys.path.insert(0, '" +
      base::SourceDir() +
      "/tests/data/fake_engines')\n"
      "import teller_hooks\n"
      "teller_hooks._GROUP_CHECK_NS = 0  # look at every step, not once a second\n"
      "import torch.distributed as dist\n"
      "from sglang.srt.managers.scheduler import Scheduler, ScheduleBatch, ForwardMode\n"
      "s = Scheduler()\n"
      "s.run_batch(ScheduleBatch(['before'], ForwardMode.DECODE))\n"
      "dist.init_process_group(rank=int(sys.argv[1]), world_size=2)\n"
      "for i in range(3):\n"
      "    s.run_batch(ScheduleBatch(['after%d' % i], ForwardMode.DECODE))\n"
      "print('group rank', dist.get_rank())\n";
  const std::string script_path = base::TempDir("python_hooks_group_script") + "/group.py";
  std::ofstream(script_path) << script;
  struct Case {
    const char* what;
    std::vector<std::string> launcher;  // NAME=value
    const char* group_rank;
    int32_t rank, world_size;
    std::string source;
    size_t process_records;
  };
  const Case cases[] = {
      {"no launcher variable: the group's rank", {}, "1", 1, 2, "torch.distributed", 2},
      {"torchrun said the same", {"RANK=1", "WORLD_SIZE=2"}, "1", 1, 2, "RANK", 1},
      {"Open MPI's rank, the group renumbered it",
       {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
       "1",
       1,
       2,
       "torch.distributed",
       2},
      {"srun's rank, the group agrees",
       {"SLURM_PROCID=0", "SLURM_NTASKS=2"},
       "0",
       0,
       2,
       "SLURM_PROCID",
       1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string bundle = MakeBundle("python_hooks_group");
    std::vector<std::string> env = WithoutLauncherRanks(HookEnv(bundle));
    env.insert(env.end(), c.launcher.begin(), c.launcher.end());
    RunResult run = RunProgram({python, script_path, c.group_rank}, env);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(std::string("group rank ") + c.group_rank), std::string::npos)
        << run.output;
    DumpedBundle dump = DumpBundle(bundle);
    ASSERT_EQ(dump.processes.size(), 1u);
    const testing::DumpedProcess& process = dump.processes[0];
    EXPECT_EQ(process.rank, c.rank);
    EXPECT_EQ(process.world_size, c.world_size);
    EXPECT_EQ(process.rank_source, c.source);
    // Reported once however many steps follow; not restated when nothing changed.
    EXPECT_EQ(process.process_records, c.process_records);
    EXPECT_EQ(process.host_ranges.size(), 4u);
  }
}

// A real torch.multiprocessing.spawn job (tests/data/torch_spawn_job.py, gloo on
// localhost, CPU only): no launcher variable, and group ranks against the processes'
// start order. Each worker's record is restated with its group's rank. Skips without
// PyTorch, and under scripts/asan.sh's preloaded ASan runtime, where PyTorch's own C++
// exceptions fail (asan_interceptors.cpp: real___cxa_throw is null); the fake-torch test
// above runs the same library path there.
TEST(PythonHookTest, SpawnedTorchWorkersRecordTheirProcessGroupRanks) {
  std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "no python3";
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload && std::string_view(preload).find("libasan") != std::string_view::npos) {
    GTEST_SKIP() << "PyTorch does not run under a preloaded ASan runtime";
  }
  if (RunProgram({python, "-c", "import torch.distributed as d; assert d.is_available()"}, {})
          .exit_code != 0) {
    GTEST_SKIP() << python << " has no torch.distributed";
  }
  const std::string source = base::SourceDir();
  std::string bundle = MakeBundle("python_hooks_torch_spawn");
  std::vector<std::string> env = WithoutLauncherRanks(HookEnv(bundle));
  env.push_back("TELLER_PYTHON_HOOKS=" + source + "/tests/data/torch_spawn_hooks.txt");
  env.push_back("PYTHONPATH=" + source + "/python/teller_hook:" + source + "/tests/data");
  RunResult run = RunProgram({python, "-c", "import torch_spawn_job; torch_spawn_job.main()"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("spawned 2"), std::string::npos) << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  std::vector<int32_t> ranks;
  for (const testing::DumpedProcess& process : dump.processes) {
    if (process.host_ranges.empty()) continue;  // the parent, if it left a folder
    SCOPED_TRACE(process.dir);
    EXPECT_EQ(process.host_ranges.size(), 3u);
    EXPECT_EQ(process.world_size, 2);
    EXPECT_EQ(process.rank_source, "torch.distributed");
    EXPECT_EQ(process.process_records, 2u);  // launched unranked, restated once
    ranks.push_back(process.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 1})) << run.output;
}

}  // namespace
}  // namespace teller::capture
