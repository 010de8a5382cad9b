"""Drives the fake engines of tests/data/fake_engines under teller's Python hooks.
python_hook_test checks the ranges it leaves in the bundle; printed lines are
checked too."""
import asyncio
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_engines"))

from vllm.v1.core.sched.scheduler import Scheduler as V1Scheduler  # noqa: E402
from vllm.v1.engine.core import EngineCore  # noqa: E402
from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: E402
from vllm.v1.core.sched.scheduler import SchedulerOutput  # noqa: E402
from vllm.core.scheduler import Scheduler as V0Scheduler  # noqa: E402
from vllm.engine.llm_engine import LLMEngine  # noqa: E402
from vllm.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2  # noqa: E402
from vllm.engine.async_llm_engine import _AsyncLLMEngine  # noqa: E402
from sglang.srt.managers.scheduler import ForwardMode, Scheduler, ScheduleBatch  # noqa: E402
from sglang.srt.managers.tp_worker import ModelTpServer  # noqa: E402
from sglang.srt.managers.tp_worker import ScheduleBatch as OldScheduleBatch  # noqa: E402
import torch.nn  # noqa: E402

# vLLM v1 engine core: prefill [a, b], decode [a, b], mixed [c new, a, b cached].
core = EngineCore(V1Scheduler([(["a", "b"], []), ([], ["a", "b"]), (["c"], ["a", "b"])]))
results = [core.step() for _ in range(3)]
print("v1", [r["tokens"] for r in results])

# vLLM v1 worker process: execute_model(scheduler_output) outside any step.
print("worker", GPUModelRunner().execute_model(SchedulerOutput([], ["w1", "w2"]))["tokens"])

# vLLM v0: prefill [r0], then decode [r0, r1] mixed; the third step raises.
engine = LLMEngine(V0Scheduler([(["r0"], 1), (["r0", "r1"], 1), ([], 0)]))
print("v0", [o.request_id for o in engine.step()], [o.request_id for o in engine.step()])
try:
    engine.step()
except RuntimeError as error:
    print("v0 raised", error)

# SGLang.
scheduler = Scheduler()
print("sglang", scheduler.run_batch(ScheduleBatch(["s1", "s2"], ForwardMode.EXTEND)),
      scheduler.run_batch(batch=ScheduleBatch(["s1"], ForwardMode.DECODE)))


# vLLM v1 with a batch queue (async scheduling): the first call schedules [q1] and
# returns; the second schedules [q2] and finishes [q1]; the third finishes [q2, q1].
core = EngineCore(V1Scheduler([(["q1"], []), (["q2"], ["q1"])]))
print("queue", [core.step_with_batch_queue() for _ in range(3)])

# vLLM Model Runner V2 in a worker: a warm-up (dummy) run, then a step.
runner = GPUModelRunnerV2()
runner._dummy_run(4)
print("mrv2", runner.execute_model(SchedulerOutput(["n1"], []))["tokens"])

# vLLM 0.6: the API server's engine steps are coroutines.
async_engine = _AsyncLLMEngine(V0Scheduler([(["x0"], 1)]))
print("v0 async", [o.request_id for o in asyncio.run(async_engine.step_async(0))])

# SGLang before 0.3.3: prefill, a mixed prefill, decode (whose first request finishes).
server = ModelTpServer(is_mixed_chunk=True)
server.forward_prefill_batch(OldScheduleBatch(["p1", "p2"]))
server.running_batch = OldScheduleBatch(["p1", "p2"])
print("sglang 0.3", server.forward_prefill_batch(OldScheduleBatch(["p3"])),
      server.forward_decode_batch(OldScheduleBatch(["p3", "p1", "p2"])))

# Plain torch: only Linear is chosen in the hooks file.
class Linear(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Dropout(torch.nn.Module):
    def forward(self, x):
        return x


print("torch", Linear()(1), Dropout()(5))

# A thread with a name.
thread = threading.Thread(target=lambda: scheduler.run_batch(ScheduleBatch(["t1"], ForwardMode.DECODE)),
                          name="hook-worker")
thread.start()
thread.join()
print("site", os.environ.get("FAKE_SITE_CUSTOMIZED", "no"))
print("wrapped", sys.modules.get("teller_hooks") is not None
      and len(sys.modules["teller_hooks"].wrapped()))
