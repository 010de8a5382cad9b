"""Fake vllm.v1.engine.core: step() schedules, runs the model in-process and hands the
output back to the scheduler; step_with_batch_queue() (async scheduling) schedules one
batch and finishes the oldest one in the queue once it is full."""
import collections

from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class EngineCore:
    def __init__(self, scheduler, batch_queue_size=2):
        self.scheduler = scheduler
        self.runner = GPUModelRunner()
        self.batch_queue_size = batch_queue_size
        self.batch_queue = collections.deque()

    def step(self):
        output = self.scheduler.schedule()
        result = self.runner.execute_model(output)
        return self.scheduler.update_from_output(output, result)

    def step_with_batch_queue(self):
        if self.scheduler.has_requests():
            output = self.scheduler.schedule()
            self.batch_queue.appendleft((output, self.runner.execute_model(output)))
            if len(self.batch_queue) < self.batch_queue_size and self.scheduler.has_requests():
                return None
        elif not self.batch_queue:
            return None
        output, result = self.batch_queue.pop()
        return self.scheduler.update_from_output(output, result)
