"""Fake vllm.v1.engine.core: step() schedules, then runs the model in-process."""
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class EngineCore:
    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.runner = GPUModelRunner()

    def step(self):
        output = self.scheduler.schedule()
        return self.runner.execute_model(output)
