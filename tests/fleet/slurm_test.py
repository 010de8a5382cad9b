#!/usr/bin/env python3
"""`teller diagnose --distributed` under Slurm (docs/fleet.md, "Under Slurm"): a
one-node cluster of Debian's slurm-wlm and munge, started here in a temporary folder
(slurmctld and slurmd on localhost, no cgroups, no accounting, a munged of its own on
its own socket and key), runs `srun --mpi=pmix -n P teller diagnose --distributed` for
P = 1, 2 and 4 and `mpirun` inside an allocation (`salloc -n 2 mpirun ...`); each
writes the diagnosis JSON of a simulated 16-rank run that one process and mpirun
write. Under srun too, a process stopped before sending its units is named with its ranks
after --fleet-timeout and the step ends with status 3, and a process killed during the
exchange ends the step, never a hang. The daemons are stopped at the end, on failure too. Exit 77 (skip), with the
reason, when the cluster cannot be started: not root, packages missing, a daemon that
does not come up."""
import argparse
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from distributed_test import diagnosis, process_state  # this folder, as a script

FAULTY_RANK = 11
STOP_TIMEOUT_S = 3
STOP_ENV = "TELLER_FLEET_TEST_STOP_PROCESS"  # that process stops before sending (SIGSTOP)
SKIP = 77
DAEMON_START_S = 20  # each daemon's start, and the node's turn to idle
RUN_S = 60           # each srun, salloc and mpirun
WHOLE_TEST_S = 150   # then it fails and stops the daemons, before ctest's TIMEOUT (180 s)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
SLURM_TOOLS = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "srun", "salloc", "sinfo",
               "squeue", "scancel", "mpirun")
PMIX_PLUGINS = ("/usr/lib/*/slurm-wlm/mpi_pmix*.so", "/usr/lib*/slurm/mpi_pmix*.so")


class Skip(Exception):
    """The cluster cannot be started here: the test is skipped with this reason."""


class Failure(Exception):
    """teller under Slurm did not do what it should."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, timeout=RUN_S, env=None, cwd=None):
    """The command's result; Failure when it fails or outlasts its timeout."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(command)} did not end within {timeout} s")
    if result.returncode != 0:
        raise Failure(f"{' '.join(command)} exited {result.returncode}\n"
                      f"{result.stdout[-1500:]}{result.stderr[-3000:]}")
    return result


def check_can_start():
    if os.geteuid() != 0:
        raise Skip("not root: slurmd must run as root to start jobs (run as root, or skip)")
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
    if missing:
        raise Skip(f"{', '.join(missing)} not installed (apt install slurm-wlm munge openmpi-bin)")
    if not any(glob.glob(pattern) for pattern in PMIX_PLUGINS):
        raise Skip("Slurm's PMIx plugin (mpi_pmix.so) not found: srun --mpi=pmix cannot "
                   "start MPI processes")


class Cluster:
    """slurmctld, slurmd and munged of a one-node cluster, all in one folder."""

    def __init__(self, folder):
        self.folder = folder
        self.daemons = []  # (name, Popen)
        # Only this cluster's: none of an allocation the test may itself run in.
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith("SLURM_")}
        self.env["SLURM_CONF"] = os.path.join(folder, "slurm.conf")
        self.munge_socket = os.path.join(folder, "munge", "munge.socket")

    def path(self, *parts):
        return os.path.join(self.folder, *parts)

    def start(self):
        # munged wants every folder above its socket searchable by all.
        for folder in (os.path.dirname(self.folder), self.folder):
            os.chmod(folder, 0o755)
        self.start_munge()
        self.write_config()
        for name in ("slurmctld", "slurmd"):
            self.start_daemon(name, [name, "-D"])
        self.wait_for_idle_node()

    def start_munge(self):
        os.makedirs(self.path("munge"), mode=0o755)
        key = self.path("munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.start_daemon("munged", [
            "munged", "--foreground", f"--key-file={key}",
            f"--socket={self.munge_socket}", f"--pid-file={self.path('munge', 'munged.pid')}",
            f"--log-file={self.path('munge', 'munged.log')}",
            f"--seed-file={self.path('munge', 'munged.seed')}"])
        deadline = time.time() + DAEMON_START_S
        while not os.path.exists(self.munge_socket):
            self.check_alive("munged")
            if time.time() > deadline:
                raise Skip(f"munged made no socket within {DAEMON_START_S} s")
            time.sleep(0.1)
        credential = subprocess.run(["munge", "-n", "-S", self.munge_socket], capture_output=True,
                                    timeout=10)
        decoded = subprocess.run(["unmunge", "-S", self.munge_socket], input=credential.stdout,
                                 capture_output=True, timeout=10)
        if decoded.returncode != 0:
            raise Skip(f"munged does not decode its own credential: {decoded.stderr.decode()}")

    def write_config(self):
        for name in ("state", "spool", "tmp", "log"):
            os.makedirs(self.path(name))
        node = socket.gethostname().split(".")[0]
        settings = {
            "ClusterName": "tellertest",
            "SlurmctldHost": f"{node}(127.0.0.1)",
            "SlurmctldPort": free_port(),
            "SlurmdPort": free_port(),
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={self.munge_socket}",
            "StateSaveLocation": self.path("state"),
            "SlurmdSpoolDir": self.path("spool"),
            "TmpFS": self.path("tmp"),
            "SlurmctldPidFile": self.path("slurmctld.pid"),
            "SlurmdPidFile": self.path("slurmd.pid"),
            "SlurmctldLogFile": self.path("log", "slurmctld.log"),
            "SlurmdLogFile": self.path("log", "slurmd.log"),
            # Job ids of their own, so that the PMIx folders (per job id) of another test
            # cluster on this host are not ours.
            "FirstJobId": 1000 + os.getpid() % 1000000,
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageType": "accounting_storage/none",
            "SchedulerType": "sched/builtin",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_CPU",
            # The node's 8 CPUs as written, whatever this machine has: 4 processes on 2 cores.
            "SlurmdParameters": "config_overrides",
            "ReturnToService": 2,
            "MpiDefault": "none",
        }
        lines = [f"{key}={value}" for key, value in settings.items()]
        lines.append(f"NodeName={node} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN")
        lines.append("PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP")
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write("\n".join(lines) + "\n")

    def start_daemon(self, name, command):
        log = open(self.path(f"{name}.out"), "w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                   start_new_session=True)
        self.daemons.append((name, process))

    def check_alive(self, name):
        for daemon, process in self.daemons:
            if daemon == name and process.poll() is not None:
                raise Skip(f"{name} exited {process.returncode} at start: {self.log_tail(name)}")

    def log_tail(self, name):
        text = ""
        for path in (self.path(f"{name}.out"), self.path("log", f"{name}.log"),
                     self.path("munge", "munged.log")):
            if name in path and os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f.read()[-1500:]
        return text.strip()

    def wait_for_idle_node(self):
        deadline = time.time() + DAEMON_START_S
        state = ""
        while time.time() < deadline:
            for name, _ in self.daemons:
                self.check_alive(name)
            result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                    env=self.env, timeout=10)
            state = result.stdout.strip()
            if result.returncode == 0 and state == "idle":
                return
            time.sleep(0.2)
        raise Skip(f"the node is not idle within {DAEMON_START_S} s (sinfo: {state!r}); "
                   f"slurmd: {self.log_tail('slurmd')}")

    def wait_for_no_jobs(self):
        deadline = time.time() + 10
        while time.time() < deadline:
            jobs = subprocess.run(["squeue", "-h"], capture_output=True, text=True,
                                  env=self.env, timeout=10)
            if jobs.returncode != 0 or not jobs.stdout.strip():
                return
            time.sleep(0.2)

    def stop(self):
        """Cancels the jobs left, then ends the daemons (TERM, then KILL)."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self.daemons):
            subprocess.run(["scancel", "--user", "root", "--full"], capture_output=True,
                           env=self.env, timeout=10)
            self.wait_for_no_jobs()
        for name, process in reversed(self.daemons):
            if process.poll() is None:
                process.terminate()
        for name, process in reversed(self.daemons):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def srun(cluster, processes, teller, *args):
    return run(["srun", "--mpi=pmix", "-n", str(processes), "--time=2", teller, "diagnose",
                "--distributed", *args], env=cluster.env)


def check_same_diagnosis(cluster, teller, work):
    bundle = os.path.join(work, "run")
    run([teller, "synth", "run", "--ranks", "16", "--requests", "6", "--seed", "5",
         "--faults", f"gpu_throttle:rank={FAULTY_RANK}", "-o", bundle])
    single = os.path.join(work, "single.json")
    run([teller, "diagnose", bundle, "--json", single, "-q"])
    expected = diagnosis(single)
    top = expected["cause"] or expected["alternatives"][0]  # as in distributed_test.py
    if top["rank"] != FAULTY_RANK:
        raise Failure(f"one process names rank {top['rank']}, not {FAULTY_RANK}")
    by_mpirun = os.path.join(work, "mpirun.json")
    run(MPIRUN + ["-n", "2", teller, "diagnose", "--distributed", bundle, "--json", by_mpirun,
                  "-q"])
    if diagnosis(by_mpirun) != expected:
        raise Failure(f"mpirun -n 2 differs from one process (diff {single} {by_mpirun})")
    for processes in (1, 2, 4):
        out = os.path.join(work, f"srun{processes}.json")
        srun(cluster, processes, teller, bundle, "--json", out, "-q")
        if diagnosis(out) != expected:
            raise Failure(f"srun -n {processes} wrote another diagnosis than mpirun and one "
                          f"process (diff {by_mpirun} {out})")
        print(f"ok: srun --mpi=pmix -n {processes}, the diagnosis of mpirun and of one process")
    out = os.path.join(work, "salloc.json")
    run(["salloc", "-n", "2", "--time=2"] + MPIRUN + [teller, "diagnose", "--distributed",
                                                     bundle, "--json", out, "-q"],
        env=cluster.env)
    if diagnosis(out) != expected:
        raise Failure(f"mpirun inside salloc -n 2 differs (diff {by_mpirun} {out})")
    print("ok: salloc -n 2 mpirun, the same diagnosis")


def srun_with_process_2_stopped(cluster, teller, bundle, out):
    """srun -n 4 with process 2 stopping itself before it sends its units: the running job
    and, once stopped, that process's pid (None if it never stopped)."""
    env = dict(cluster.env, **{STOP_ENV: "2"})
    job = subprocess.Popen(["srun", "--mpi=pmix", "-n", "4", "--time=2", teller, "diagnose",
                            "--distributed", bundle, "--json", out, "-q", "--fleet-timeout",
                            str(STOP_TIMEOUT_S)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + RUN_S
    while time.time() < deadline and job.poll() is None:
        for pid in teller_pids_of_rank(2, out):
            if process_state(pid) == "T":
                return job, pid
        time.sleep(0.01)
    return job, None


def teller_pids_of_rank(rank, out):
    """The teller processes of MPI rank `rank` writing `out` (Slurm's PMIx plugin gives each
    task its rank in PMIX_RANK)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if out.encode() in command and env.get(b"PMIX_RANK") == str(rank).encode():
            pids.append(int(pid))
    return pids


def finish(job, what):
    try:
        return job.communicate(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        job.kill()
        job.communicate()
        raise Failure(f"srun hangs {RUN_S} s after {what}")


def check_a_lost_process(cluster, teller, work):
    bundle = os.path.join(work, "run")
    out = os.path.join(work, "stopped.json")
    job, stopped = srun_with_process_2_stopped(cluster, teller, bundle, out)
    _, err = finish(job, "process 2 stopped")
    expected = f"process 2 did not answer within {STOP_TIMEOUT_S} s: ranks 8-11"
    notes = diagnosis(out)["collection"]["notes"] if os.path.exists(out) else []
    if stopped is None or job.returncode != 3 or not any(n.startswith(expected) for n in notes):
        raise Failure(f"srun with process 2 stopped (pid {stopped}) ended {job.returncode}, "
                      f"not 3 with the note {expected!r}: notes {notes}\n{err[-2000:]}")
    if process_state(stopped) is not None:
        raise Failure(f"the stopped process 2 (pid {stopped}) outlived the job step")
    print("ok: srun, a stopped process named with its ranks 8-11, exit 3")
    out = os.path.join(work, "killed.json")
    job, stopped = srun_with_process_2_stopped(cluster, teller, bundle, out)
    if stopped is not None:
        os.kill(stopped, signal.SIGKILL)
    _, err = finish(job, "process 2 was killed")
    if stopped is None or job.returncode == 0:
        raise Failure(f"srun with process 2 killed (pid {stopped}) ended {job.returncode}:\n"
                      f"{err[-2000:]}")
    said = [line for line in err.splitlines() if "task 2: Killed" in line]
    print(f"ok: srun, a process killed during the exchange ends the step ({job.returncode}): "
          f"{said[0] if said else err.splitlines()[-1]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--teller", required=True)
    args = parser.parse_args()
    os.environ["TELLER_CACHE_DIR"] = "none"
    teller = os.path.abspath(args.teller)
    work = tempfile.mkdtemp(prefix="teller_slurm_")
    cluster = Cluster(os.path.join(work, "cluster"))
    os.mkdir(cluster.folder)
    # A signal (^C, a kill) and the test's own time limit end it through its finally below.
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda number, frame: sys.exit(f"FAIL: signal {number}"))

    def out_of_time(number, frame):
        raise Failure(f"the test ran over {WHOLE_TEST_S} s")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(WHOLE_TEST_S)
    code = 0
    try:
        check_can_start()
        cluster.start()
        print("ok: slurmctld, slurmd and munged started; the node is idle")
        check_same_diagnosis(cluster, teller, work)
        check_a_lost_process(cluster, teller, work)
    except Skip as skip:
        print(f"SKIP: {skip}")
        code = SKIP
    except Failure as failure:
        print(f"FAIL: {failure}")
        for name in ("slurmctld", "slurmd"):
            print(f"--- {name}:\n{cluster.log_tail(name)}")
        code = 1
    finally:
        signal.alarm(0)
        cluster.stop()
    if code != 1:  # a failure keeps the folder: its logs
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
