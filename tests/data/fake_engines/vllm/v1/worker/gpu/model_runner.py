"""Fake vllm.v1.worker.gpu.model_runner (Model Runner V2, not a subclass of the V1
GPUModelRunner): its warm-up runs go through execute_model(dummy_run=True)."""


class _DummySchedulerOutput:
    def __init__(self, num_reqs):
        self.scheduled_new_reqs = []
        self.num_scheduled_tokens = {"_dummy_req_%d" % i: 1 for i in range(num_reqs)}


class GPUModelRunner:
    def _dummy_run(self, num_reqs):
        return self.execute_model(_DummySchedulerOutput(num_reqs), dummy_run=True)

    def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False):
        return {"tokens": len(scheduler_output.num_scheduled_tokens)}
