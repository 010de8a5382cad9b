"""Python hook overhead: a loop calling a function, wrapped by teller's hooks and not.
Usage: capture_python_bench.py LIBTELLER_CAPTURE_SO HOOK_DIR [calls]
Prints one JSON object (ns per call each way, the difference, bytes per range)."""
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = """
import sys, time
sys.path.insert(0, {dir!r})
import teller_bench_target as t
n = {calls}
t.work(0)
start = time.perf_counter_ns()
for i in range(n):
    t.work(i)
print((time.perf_counter_ns() - start) / n)
"""


def run(env, tmp, calls):
    code = CHILD.format(dir=tmp, calls=calls)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main():
    lib, hook_dir = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "teller_bench_target.py"), "w") as f:
            f.write("def work(x):\n    return x\n")
        hooks = os.path.join(tmp, "hooks.txt")
        with open(hooks, "w") as f:
            f.write("teller_bench_target:work:FE\n")
        bundle = os.path.join(tmp, "bundle")
        os.mkdir(bundle)
        plain_env = dict(os.environ, TELLER_PYTHON_HOOKS="0")
        plain_env.pop("TELLER_OUTPUT_DIR", None)
        hooked_env = dict(os.environ, TELLER_OUTPUT_DIR=bundle, TELLER_CAPTURE_LIB=lib,
                          TELLER_PYTHON_HOOKS=hooks,
                          PYTHONPATH=hook_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
        plain = run(plain_env, tmp, calls)
        hooked = run(hooked_env, tmp, calls)
        size = sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(bundle) for name in names if name.endswith(".bin"))
    print(json.dumps({"calls": calls, "plain_ns_per_call": round(plain, 1),
                      "hooked_ns_per_call": round(hooked, 1),
                      "hook_overhead_ns_per_call": round(hooked - plain, 1),
                      "bytes_per_range": round(size / (calls + 1), 2)}))


if __name__ == "__main__":
    main()
