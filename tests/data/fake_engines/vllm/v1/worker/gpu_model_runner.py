"""Fake vllm.v1.worker.gpu_model_runner."""


class GPUModelRunner:
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        return {"tokens": len(scheduler_output.num_scheduled_tokens)}
