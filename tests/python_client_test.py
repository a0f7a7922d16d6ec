"""The Python client (client/python/shardwise) against a real coordinator and a real
worker process: submit from a dict and from a YAML file, watch, get, list with filters,
cancel, set_hook, scale, and errors carrying the coordinator's code and message. Run by
tests/python_client_test.sh with Debian's python3 and python3-grpcio."""

import gc
import os
import pathlib
import pickle
import subprocess
import tempfile
import threading
import time
import unittest
import weakref

import grpc

import shardwise
import shardwise.job_spec
from shardwise import retry_policy

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardwise")


def binary(path):
    return os.path.join(RUNFILES, path)


def spec(world_size=1, steps=20, name="py"):
    return {
        "name": name,
        "model": {"layer_widths": [4, 8, 3]},
        "optimizer": {"sgd": {"lr": 0.1}},
        "data": {"synthetic": {"seed": 1}},
        "global_batch_size": 8,
        "steps": steps,
        "world_size": world_size,
    }


class ClusterForPython:
    """A coordinator (with a tokens file: alice submits, vic views) and one worker."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.tokens = {"alice": "sw_py_alice", "vic": "sw_py_vic", "workers": "sw_py_workers"}
        with open(os.path.join(self.dir, "worker.token"), "w") as worker_token:
            worker_token.write(self.tokens["workers"])
        with open(os.path.join(self.dir, "tokens.yaml"), "w") as tokens:
            tokens.write("tokens:\n")
            for principal, role in (("alice", "submitter"), ("vic", "viewer"),
                                    ("workers", "worker")):
                digest = subprocess.run(["sha256sum"], input=self.tokens[principal].encode(),
                                        capture_output=True, check=True).stdout.split()[0]
                tokens.write(f"  - principal: {principal}\n    role: {role}\n"
                             f"    sha256: {digest.decode()}\n")
        self.address = None
        self.logs = []
        self.processes = [self._start_coordinator("127.0.0.1:0")]
        self.processes.append(subprocess.Popen(
            [binary("worker/shardwise-worker"), f"--coordinator={self.address}", "--name=w0",
             f"--token_file={self.dir}/worker.token"],
            stderr=self._log("worker.log")))
        client = self.client("vic")
        deadline = time.monotonic() + 60
        while not any(w.state == shardwise.proto.job_pb2.IDLE for w in client.workers()):
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"worker w0 did not register within 60 s (see {self.dir})")
            time.sleep(0.05)

    def _start_coordinator(self, address):
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        process = subprocess.Popen(
            [binary("server/shardwise-coordinator"), f"--address={address}",
             f"--port_file={port_file}", f"--state_file={self.dir}/state.db",
             f"--tokens_file={self.dir}/tokens.yaml", "--heartbeat_interval_ms=200",
             f"--allowed_input_paths={self.dir}", f"--allowed_output_paths={self.dir}"],
            stderr=self._log("coordinator.log"))
        for _ in range(200):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            time.sleep(0.05)
        with open(port_file) as file:
            self.address = f"127.0.0.1:{file.read().strip()}"
        return process

    def _log(self, name):
        self.logs.append(open(os.path.join(self.dir, name), "a"))
        return self.logs[-1]

    def restart_coordinator(self):
        """SIGTERM, as an upgrade sends, then a new one on the same port and state file."""
        self.processes[0].terminate()
        self.processes[0].wait()
        self.processes[0] = self._start_coordinator(self.address)

    def client(self, principal):
        return shardwise.Client(self.address, token=self.tokens.get(principal))

    def stop(self):
        for process in self.processes:
            process.kill()
            process.wait()
        for log in self.logs:
            log.close()


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = ClusterForPython()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def test_submit_a_dict_and_watch_it_to_its_end(self):
        alice = self.cluster.client("alice")
        # The one worker is kept busy so the job waits until its watch is open: a job
        # this small can end before a watch starts, which then sees only the end.
        busy = alice.submit(spec(steps=10**8, name="keeps-the-worker"))
        busy_updates = alice.watch(busy)
        while next(busy_updates).progress.step == 0:
            pass
        busy_updates.close()
        job_id = alice.submit(spec(steps=30))
        watch = alice.watch(job_id)
        updates = [next(watch)]
        alice.cancel(busy)  # before any assertion: the tests after need the worker
        self.assertEqual(updates[0].state, shardwise.PENDING)
        updates.extend(watch)  # a watch sends the newest version; it may skip between
        self.assertEqual(updates[-1].state, shardwise.SUCCEEDED)
        self.assertEqual(updates[-1].progress.step, 30)
        job = alice.get(job_id)
        self.assertEqual(job.submitter, "alice")
        self.assertEqual(job.spec.name, "py")
        self.assertTrue(any("every rank completed" in e.message for e in job.events))

    def test_submit_a_yaml_file_whose_paths_are_relative(self):
        alice = self.cluster.client("alice")
        path = os.path.join(self.cluster.dir, "job.yaml")
        with open(path, "w") as file:
            file.write("name: from-yaml\nmodel: {layer_widths: [4, 8, 3]}\n"
                       "optimizer: {sgd: {lr: 0.1}}\ndata: {synthetic: {seed: 1}}\n"
                       "global_batch_size: 8\nsteps: 10\nworld_size: 1\n"
                       "output: {final_model_path: model.safetensors}\n")
        cwd = os.getcwd()
        os.chdir(self.cluster.dir)
        try:
            job_id = alice.submit("job.yaml")
        finally:
            os.chdir(cwd)
        final = list(alice.watch(job_id))[-1]
        self.assertEqual(final.state, shardwise.SUCCEEDED, final.reason)
        self.assertEqual(final.spec.output.final_model_path,
                         os.path.realpath(os.path.join(self.cluster.dir, "model.safetensors")))
        self.assertTrue(os.path.exists(os.path.join(self.cluster.dir, "model.safetensors")))

    def test_relative_paths_become_absolute_in_either_spelling(self):
        given = {"data": {"tokens": {"trainPath": "t/train.bin", "tokenizer": "t/tokenizer"}},
                 "init": {"huggingface": {"dir": "hf"}},
                 "output": {"huggingface_dir": "out", "checkpointDir": "/abs/./x/../ckpt/",
                            "final_model_path": "//abs//m.safetensors"}}
        before = repr(given)
        message = shardwise.job_spec.spec_message(given)
        cwd = os.getcwd()
        self.assertEqual(message.data.tokens.train_path, os.path.join(cwd, "t/train.bin"))
        self.assertEqual(message.data.tokens.tokenizer, os.path.join(cwd, "t/tokenizer"))
        self.assertEqual(message.init.huggingface.dir, os.path.join(cwd, "hf"))
        self.assertEqual(message.output.huggingface_dir, os.path.join(cwd, "out"))
        # Absolute ones made normal as the CLI makes them (LexicallyNormal).
        self.assertEqual(message.output.checkpoint_dir, "/abs/ckpt")
        self.assertEqual(message.output.final_model_path, "/abs/m.safetensors")
        self.assertEqual(repr(given), before, "the caller's dict was changed")
        # A JobSpec too, as a copy: the caller's message stays as it was.
        spec_message = shardwise.proto.job_spec_pb2.JobSpec()
        spec_message.data.tokens.train_path = "t/train.bin"
        copy = shardwise.job_spec.spec_message(spec_message)
        self.assertEqual(copy.data.tokens.train_path, os.path.join(cwd, "t/train.bin"))
        self.assertEqual(spec_message.data.tokens.train_path, "t/train.bin")

    def test_a_watch_follows_the_job_through_a_coordinator_restart(self):
        alice = self.cluster.client("alice")
        job_id = alice.submit(spec(steps=10**8, name="through-restart"))  # until cancelled
        lost = []
        updates = alice.watch(job_id, on_lost=lost.append)
        while next(updates).progress.step == 0:
            pass
        self.cluster.restart_coordinator()
        # The same watch sees the ranks re-attach to the new coordinator, then the end.
        final, cancelled = None, False
        for final in updates:
            if not cancelled and any("re-attached" in e.message for e in final.events):
                alice.cancel(job_id)
                cancelled = True
        self.assertEqual(final.state, shardwise.CANCELLED, final.reason)
        self.assertTrue(any("re-attached" in e.message for e in final.events))
        # Each lost stream was told, as the CLI says "watching JOB again".
        self.assertGreaterEqual(len(lost), 1)
        self.assertTrue(all(isinstance(error, shardwise.ShardwiseError) for error in lost))
        self.assertIn(lost[0].code, ("UNAVAILABLE", "CANCELLED"))

    def test_a_watch_ends_at_its_timeout_naming_the_state_last_seen(self):
        alice = self.cluster.client("alice")
        job_id = alice.submit(spec(world_size=4, name="never-placed"))  # one worker: it waits
        try:
            updates = alice.watch(job_id, timeout=1)
            self.assertEqual(next(updates).state, shardwise.PENDING)
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                next(updates)
            self.assertEqual(raised.exception.code, "DEADLINE_EXCEEDED")
            self.assertIn(f"job {job_id} did not end within the watch's timeout of 1 s (it "
                          "was PENDING when last seen)", raised.exception.message)
            # A timeout past what gRPC's deadline holds (int64 nanoseconds) is the loop's.
            forever = alice.watch(job_id, timeout=1e10)
            self.assertEqual(next(forever).state, shardwise.PENDING)
            forever.close()
            # Counted from the call, not from the first next().
            late = alice.watch(job_id, timeout=0.2)
            time.sleep(0.3)
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                next(late)
            self.assertEqual(raised.exception.code, "DEADLINE_EXCEEDED")
            self.assertIn("(no update came)", raised.exception.message)
        finally:
            alice.cancel(job_id)

    def test_a_close_from_another_thread_ends_calls_and_watches_with_failed_precondition(self):
        alice = self.cluster.client("alice")
        job_id = alice.submit(spec(world_size=4, name="watched-while-closed"))
        try:
            client = self.cluster.client("alice")
            updates = client.watch(job_id)
            next(updates)
            client.close()  # the stream is in flight: gRPC ends it
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                next(updates)
            self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
            self.assertIn("is closed", raised.exception.message)
            # A call in flight as another thread closes the channel: gRPC's ValueError.
            client = self.cluster.client("alice")
            get_job = client._stub.GetJob

            def closed_under_the_call(request, timeout, metadata):
                client.close()
                return get_job(request, timeout=timeout, metadata=metadata)

            client._stub.GetJob = closed_under_the_call
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                client.get(job_id)
            self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
        finally:
            alice.cancel(job_id)

    def test_list_filters_and_cancel(self):
        alice = self.cluster.client("alice")
        too_big = spec(world_size=4, name="too-big")  # one worker: it waits
        waiting = alice.submit(too_big)
        pending = alice.list(states=["PENDING"], submitter="alice")
        self.assertIn(waiting, [job.id for job in pending])
        self.assertTrue(all(job.state == shardwise.PENDING for job in pending))
        self.assertEqual(alice.cancel(waiting).state, shardwise.CANCELLED)
        self.assertEqual(len(alice.list(limit=1)), 1)

    def test_errors_carry_the_coordinators_code_and_message(self):
        alice = self.cluster.client("alice")
        bad = spec()
        bad["world_size"] = 0
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.submit(bad)
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertIn("world_size", raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.get("job-404")
        self.assertEqual(raised.exception.code, "NOT_FOUND")
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            self.cluster.client("vic").submit(spec())
        self.assertEqual(raised.exception.code, "PERMISSION_DENIED")
        self.assertIn("vic (viewer) may not submit", raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            self.cluster.client(None).list()
        self.assertEqual(raised.exception.code, "UNAUTHENTICATED")
        done = alice.submit(spec(steps=5))
        list(alice.watch(done))
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.set_hook(done, "bf16_compress")
        self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.set_hook(done, "fp8_compress")
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.scale(done, 1)
        self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
        self.assertIn("only a running job with fault_tolerance can be scaled",
                      raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.submit({"world_size": "four"})
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        # Past the coordinator's 4 MiB: gRPC's RESOURCE_EXHAUSTED, told at once rather
        # than asked again for two minutes as a busy coordinator is.
        started = time.monotonic()
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.submit(spec(name="n" * (5 << 20)))
        self.assertEqual(raised.exception.code, "RESOURCE_EXHAUSTED")
        self.assertIn("message larger than max", raised.exception.message)
        self.assertLess(time.monotonic() - started, retry_policy.BUSY_RETRY_SECONDS)

    def test_list_takes_states_in_any_case_and_a_limit_of_0_as_all(self):
        alice = self.cluster.client("alice")
        waiting = alice.submit(spec(world_size=4, name="waits"))  # one worker: it waits
        self.assertIn(waiting, [job.id for job in alice.list(states=["pending"])])
        alice.cancel(waiting)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.list(states=["sleeping"])
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertIn("states: unknown state 'sleeping'", raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.list(limit=-1)
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertIn("limit: -1 is negative", raised.exception.message)

        class TwoPages:  # what a coordinator with more jobs than a page answers
            def ListJobs(self, request, timeout, metadata):
                page = shardwise.proto.job_service_pb2.ListJobsResponse()
                page.jobs.add().id = "job-2" if request.page_token else "job-1"
                page.next_page_token = "" if request.page_token else "1"
                return page

        with shardwise.Client("127.0.0.1:1") as paged:
            paged._stub = TwoPages()
            self.assertEqual([job.id for job in paged.list(limit=0)], ["job-1", "job-2"])
            self.assertEqual([job.id for job in paged.list(limit=1)], ["job-1"])

    def test_spec_files_are_read_as_the_cli_reads_them(self):
        alice = self.cluster.client("alice")
        twice = os.path.join(self.cluster.dir, "twice.yaml")
        with open(twice, "w") as file:
            file.write("steps: 10\nworld_size: 1\nsteps: 100000\n")
        fifo = os.path.join(self.cluster.dir, "spec.fifo")
        os.mkfifo(fifo)  # opening it would block until a writer came
        large = os.path.join(self.cluster.dir, "large.yaml")
        with open(large, "w") as file:
            file.write("# " + "x" * (1 << 20) + "\n")
        broken = os.path.join(self.cluster.dir, "broken.yaml")
        with open(broken, "w") as file:
            file.write("steps: [10\n")
        # Past the 4300 digits Python's int() reads (its ValueError otherwise).
        digits = os.path.join(self.cluster.dir, "digits.yaml")
        with open(digits, "w") as file:
            file.write("world_size: 1\nsteps: " + "9" * 5000 + "\n")
        for path, code, says in (
                (digits, "INVALID_ARGUMENT", "line 2: the integer 99999999999999999999... has "
                 "5000 digits; no field holds it"),
                (twice, "INVALID_ARGUMENT", "field 'steps' is given twice"),
                (fifo, "NOT_FOUND", "not a regular file"),
                (large, "INVALID_ARGUMENT", "at most 1048576 are allowed"),
                (broken, "INVALID_ARGUMENT", broken),
                (os.path.join(self.cluster.dir, "none.yaml"), "NOT_FOUND", "cannot read")):
            with self.assertRaises(shardwise.ShardwiseError, msg=path) as raised:
                alice.submit(path)
            self.assertEqual(raised.exception.code, code, raised.exception.message)
            self.assertIn(says, raised.exception.message)

    def test_scalars_read_as_the_cli_reads_them_not_as_yaml_1_1(self):
        path = os.path.join(self.cluster.dir, "scalars.yaml")
        with open(path, "w") as file:
            file.write("name: on\ndata: {tokens: {seed: 0042, train_path: '/t.bin', "
                       "tokenizer: 2024-06-01}}\noutput: {overwrite: true}\n"
                       "optimizer: {sgd: {lr: .5, momentum: 1.}}\nsteps: +10\n")
        message = shardwise.job_spec.spec_message(path)
        self.assertEqual(message.name, "on")  # YAML 1.1: True
        self.assertEqual(message.data.tokens.seed, 42)  # YAML 1.1: octal, 34
        self.assertTrue(message.data.tokens.tokenizer.endswith("2024-06-01"))  # 1.1: a date
        self.assertTrue(message.output.overwrite)
        self.assertEqual(message.optimizer.sgd.lr, 0.5)
        self.assertEqual(message.optimizer.sgd.momentum, 1.0)
        self.assertEqual(message.steps, 10)
        # A bool field's string is a bool as protobuf's C++ JSON parser reads it (YES, n,
        # '1'), any other one refused: YAML 1.1's on is not among them.
        words = "output: {overwrite: YES}\nfsdp: {forward_prefetch: 'n', limit_all_gathers: '1'}\n"
        with open(path, "w") as file:
            file.write(words)
        message = shardwise.job_spec.spec_message(path)
        self.assertTrue(message.output.overwrite)
        self.assertFalse(message.fsdp.forward_prefetch)
        self.assertTrue(message.fsdp.HasField("limit_all_gathers"))
        self.assertTrue(message.fsdp.limit_all_gathers)
        for text, says in (("output: {overwrite: on}\n", "overwrite"),
                           ("a: " + "[" * 70 + "]" * 70 + "\n", "nested deeper than 64"),
                           ("a: &a [x, x, x, x, x, x, x, x]\n" + "".join(
                               f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)},"
                               f" *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)},"
                               f" *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9)),
                            "expands to more than 4 MiB")):
            with open(path, "w") as file:
                file.write(text)
            with self.assertRaises(shardwise.ShardwiseError, msg=text[:40]) as raised:
                shardwise.job_spec.spec_message(path)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
            self.assertIn(says, raised.exception.message)

    def test_the_cli_and_python_read_a_spec_file_alike(self):
        """Each file submitted by the CLI and by Python makes the same JobSpec, or is
        refused with the same message (past protobuf's and the YAML parsers' own words,
        which differ between C++ and Python: there, the same prefix)."""
        alice = self.cluster.client("alice")
        token_file = os.path.join(self.cluster.dir, "alice.token")
        with open(token_file, "w") as file:
            file.write(self.cluster.tokens["alice"])
        waits = ("model: {layer_widths: [4, 8, 3]}\noptimizer: {sgd: {lr: .5, momentum: 1.}}\n"
                 "data: {synthetic: {seed: 0042}}\nglobal_batch_size: 8\nsteps: +10\n"
                 "world_size: 4\n")  # one worker: the jobs wait, and are cancelled
        aliases = "a: &a [x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 8) + "]\n"
            for i in range(9))
        accepted = {
            "numbers.yaml": "name: 2024-06-01\n" + waits,
            "spellings.yaml": waits.replace("global_batch_size", "globalBatchSize") +
                              "output: {overwrite: true, finalModelPath: NULL}\n",
            # A bool field's string is read as protobuf's C++ JSON parser reads it.
            "words.yaml": waits + "output: {overwrite: YES}\nfsdp: {forward_prefetch: 'n'}\n",
            # Where protobuf's JSON parsers differ, as the C++ one reads it.
            "numbers-as-text.yaml": waits.replace("lr: .5", "lr: '0x1p-3'") + "name: '+5'\n",
            "lone-value.yaml": waits.replace("[4, 8, 3]", "[4, 8, null, 3]").replace(
                "momentum: 1.}", "momentum: 1.}, overlap: {mode: HOOK_THEN_OPTIMIZER, "
                "params: 0.weight}"),
            "quoted.yaml": "name: 'on'\n" + waits,
            "spec.json": '{"name": "json", "model": {"layer_widths": [4, 8, 3]}, "optimizer": '
                         '{"sgd": {"lr": 0.1}}, "data": {"synthetic": {"seed": 1}}, '
                         '"global_batch_size": 8, "steps": 10, "world_size": 4}',
        }
        refused = {  # file: (its text, whether the messages are equal or share a prefix)
            "twice.yaml": (waits + "steps: 20\n", True),
            "spelled-twice.yaml": (waits + "globalBatchSize: 8\n", True),
            "deep.yaml": ("a: " + "[" * 70 + "]" * 70 + "\n", True),
            # 65 levels: the root mapping, then 64 lists (the CLI reads 64, no more).
            "deep-by-one.yaml": ("a: " + "[" * 64 + "]" * 64 + "\n", True),
            "aliases.yaml": (aliases, True),
            "list.yaml": ("- a\n- b\n", True),
            "empty.yaml": ("", True),
            "key.yaml": ("? [a]\n: 1\n", True),
            "broken.yaml": ("steps: [10\n", False),
            "off.yaml": (waits + "output: {overwrite: off}\n", False),
            "underscores.yaml": (waits.replace("steps: +10", "steps: 1_000"), True),
            "spaced.yaml": (waits.replace("lr: .5", "lr: ' 0.5'"), True),
            "inf.yaml": (waits.replace("lr: .5", "lr: inf"), True),
            # Python's bool is an int: without a check ParseDict took these as 1.
            "bool-for-a-number.yaml": (waits.replace("lr: .5", "lr: true"), True),
            "bool-for-an-enum.yaml": (waits + "loss: true\n", True),
            "bool-for-a-string.yaml": ("name: false\n" + waits, True),
            "list-for-message.yaml": (waits + "output: []\n", True),
            "two-documents.yaml": (waits + "---\n" + waits, True),
        }
        for name, text in list(accepted.items()) + [(n, t) for n, (t, _) in refused.items()]:
            with open(os.path.join(self.cluster.dir, name), "w") as file:
                file.write(text)
        for name in list(accepted) + list(refused) + ["absent.yaml"]:
            path = os.path.join(self.cluster.dir, name)
            cli = subprocess.run(
                [binary("client/shardwise"), "submit", path, f"--coordinator={self.cluster.address}",
                 f"--token_file={token_file}"], capture_output=True, text=True, check=False)
            try:
                python_job, python_error = alice.submit(path), None
            except shardwise.ShardwiseError as error:
                python_job, python_error = None, error
            if name in accepted:
                self.assertEqual(cli.returncode, 0, f"{name}: {cli.stderr}")
                self.assertIsNone(python_error, name)
                cli_job = cli.stdout.strip()
                self.assertEqual(alice.get(cli_job).spec, alice.get(python_job).spec, name)
                alice.cancel(cli_job)
                alice.cancel(python_job)
                continue
            self.assertEqual(cli.returncode, 2, f"{name}: {cli.stdout} {cli.stderr}")
            self.assertIsNotNone(python_error, f"{name}: Python accepted what the CLI refused")
            cli_code, cli_message = cli.stderr.splitlines()[0].removeprefix(
                "shardwise: ").split(": ", 1)
            self.assertEqual(python_error.code, cli_code, name)
            if refused.get(name, (None, True))[1]:
                self.assertEqual(python_error.message, cli_message, name)
            else:
                prefix = cli_message[:cli_message.index("job spec") + len("job spec")]
                self.assertTrue(python_error.message.startswith(prefix),
                                f"{name}: {python_error.message!r} vs {cli_message!r}")
            self.assertEqual(python_error.code,
                             "NOT_FOUND" if name == "absent.yaml" else "INVALID_ARGUMENT", name)

    def test_a_dict_that_names_a_field_twice_is_refused(self):
        given = spec()
        given["globalBatchSize"] = 16
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.job_spec.spec_message(given)
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertIn("field 'globalBatchSize' is given twice in the same mapping "
                      "(as 'global_batch_size')", raised.exception.message)
        nested = {"data": {"tokens": {"train_path": "/a", "trainPath": "/b"}}}
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.job_spec.spec_message(nested)
        self.assertIn("field 'trainPath' is given twice", raised.exception.message)

    def test_a_dict_is_read_as_the_cli_reads_its_json(self):
        message = shardwise.job_spec.spec_message(
            {"output": {"overwrite": "yes"}, "model": {"layerWidths": 4}, "steps": "+7"})
        self.assertTrue(message.output.overwrite)
        self.assertEqual(list(message.model.layer_widths), [4])
        self.assertEqual(message.steps, 7)
        for given, says in (({"steps": "1_000"}, 'job spec: (steps): invalid value "1_000" for '
                              "type TYPE_INT64"),
                            ({"optimizer": {"sgd": {"lr": "inf"}}},
                             'job spec: (optimizer.sgd.lr): invalid value "inf" for type '
                             "TYPE_DOUBLE"),
                            ({"output": []}, "job spec: output: Proto field is not repeating")):
            with self.assertRaises(shardwise.ShardwiseError, msg=str(given)) as raised:
                shardwise.job_spec.spec_message(given)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
            self.assertIn(says, raised.exception.message)

    def test_the_address_token_and_ca_are_checked_as_the_cli_checks_them(self):
        for address, says in (("127.0.0.1:99999", "has port '99999', not one from 1 to 65535"),
                              ("127.0.0.1", "has no port"), ("", "is empty"),
                              (":7070", "has no host"), ("::1:7070", "is not HOST:PORT (an IPv6"),
                              ("bad host:7070", "has a space or control character")):
            with self.assertRaises(shardwise.ShardwiseError, msg=address) as raised:
                shardwise.Client(address)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
            self.assertIn(f"address: '{address}' {says}", raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client(b"127.0.0.1:7070")
        self.assertIn("address: bytes is not a str", raised.exception.message)
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client("127.0.0.1:7070", token=b"sw_x")
        self.assertIn("token: bytes is not a str", raised.exception.message)
        for address in ("[::1]:7070", "localhost:1", "dns:///coordinator:7070", "unix:/run/s"):
            shardwise.Client(address).close()
        environment = dict(os.environ)
        try:
            os.environ["SHARDWISE_COORDINATOR"] = "coordinator:0"
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                shardwise.Client()
            self.assertIn("$SHARDWISE_COORDINATOR: 'coordinator:0' has port '0'",
                          raised.exception.message)
            os.environ["SHARDWISE_COORDINATOR"] = ""
            with shardwise.Client() as default:
                self.assertEqual(default.address, "127.0.0.1:7070")
            # A blank $SHARDWISE_TOKEN is no token, as for the CLI: nothing refused or sent.
            os.environ["SHARDWISE_TOKEN"] = " \n"
            with shardwise.Client("192.0.2.1:7070") as blank:
                self.assertEqual(blank._metadata, ())
            # token="" and tls_ca="" override the environment.
            os.environ["SHARDWISE_TOKEN"] = "sw_from_environment"
            os.environ["SHARDWISE_TLS_CA"] = os.path.join(self.cluster.dir, "no-ca.pem")
            with shardwise.Client("192.0.2.1:7070", tls_ca="", token="") as plain:
                self.assertEqual(plain._metadata, ())
            os.environ["SHARDWISE_TOKEN"] = "sw_one\nforged: header"
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                shardwise.Client(tls_ca="")
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
            self.assertIn("$SHARDWISE_TOKEN: the token holds a space", raised.exception.message)
            self.assertNotIn("sw_one", raised.exception.message)
            # Only ASCII whitespace is stripped, as the CLI strips it: a no-break space
            # pasted after the token is refused by both, not accepted here alone.
            os.environ["SHARDWISE_TOKEN"] = "sw_one\u00a0"
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                shardwise.Client(tls_ca="")
            self.assertIn("non-ASCII", raised.exception.message)
        finally:
            os.environ.clear()
            os.environ.update(environment)

    def test_timeline_and_worker_filters(self):
        alice = self.cluster.client("alice")
        job_id = alice.submit(spec(steps=5, name="timed"))
        final = list(alice.watch(job_id))[-1]
        self.assertEqual(final.state, shardwise.SUCCEEDED, final.reason)
        timeline = alice.timeline(job_id)
        self.assertEqual(timeline.job_id, job_id)
        self.assertEqual([rank.rank for rank in timeline.ranks], [0])
        self.assertEqual(timeline.ranks[0].worker_id, alice.workers()[0].id)
        steps = {span.step for span in timeline.ranks[0].spans if span.name == "step"}
        self.assertEqual(steps, {0, 1, 2, 3, 4})
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            alice.timeline("job-404")
        self.assertEqual(raised.exception.code, "NOT_FOUND")
        self.assertEqual([w.name for w in alice.workers(device="cpu")], ["w0"])
        self.assertEqual([w.name for w in alice.workers(limit=1)], ["w0"])
        self.assertEqual([w.name for w in alice.workers(limit=0)], ["w0"])  # 0: all
        self.assertEqual([w.name for w in alice.workers(states=["idle", "busy"])], ["w0"])
        self.assertEqual(alice.workers(device="CUDA"), [])
        self.assertEqual(alice.workers(states=[shardwise.proto.job_pb2.LOST]), [])
        for kwargs, says in (({"states": ["sleeping"]},
                              "states: unknown state 'sleeping' (expected IDLE, BUSY, DRAINING or "
                              "LOST)"),
                             ({"device": "tpu"}, "device: unknown device 'tpu' (expected CPU or "
                              "CUDA)"),
                             ({"device": 0}, "device: unknown value 0")):
            with self.assertRaises(shardwise.ShardwiseError, msg=str(kwargs)) as raised:
                alice.workers(**kwargs)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
            self.assertIn(says, raised.exception.message)

    def test_a_closed_client_says_so(self):
        client = self.cluster.client("vic")
        client.close()
        for call in (client.workers, lambda: next(client.watch("job-1"))):
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                call()
            self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
            self.assertIn("is closed", raised.exception.message)

    def test_a_submission_made_again_with_its_request_id_makes_one_job(self):
        alice = self.cluster.client("alice")
        first = alice.submit(spec(world_size=4, name="retried"), request_id="py-nightly-7")
        again = alice.submit(spec(world_size=4, name="retried"), request_id="py-nightly-7")
        self.assertEqual(again, first)
        alice.cancel(first)
        with shardwise.Client("127.0.0.1:1") as nobody:
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                nobody.submit(spec())
        self.assertEqual(raised.exception.code, "UNAVAILABLE")
        self.assertEqual(len(raised.exception.request_id), 32)

    def test_a_watch_that_ends_before_any_update_is_unavailable(self):
        class EmptyStream:  # a stream that ends OK without a message
            def __iter__(self):
                return iter(())

            def cancel(self):
                pass

        class NoUpdate:
            def WatchJob(self, request, timeout, metadata):
                return EmptyStream()

        with shardwise.Client("127.0.0.1:1") as client:
            client._stub = NoUpdate()
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                list(client.watch("job-1"))
        self.assertEqual(raised.exception.code, "UNAVAILABLE")
        self.assertIn("the watch ended before any update", raised.exception.message)

    def test_a_coordinator_not_reached_or_a_ca_not_read_is_named(self):
        with shardwise.Client("127.0.0.1:1") as nobody:
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                nobody.get("job-1")
            self.assertEqual(raised.exception.code, "UNAVAILABLE")
            self.assertIn("cannot reach the coordinator at 127.0.0.1:1", raised.exception.message)
            # A watch fails as any call does, its first call's retries no lost stream.
            lost = []
            with self.assertRaises(shardwise.ShardwiseError) as raised:
                list(nobody.watch("job-1", on_lost=lost.append))
            self.assertEqual(raised.exception.code, "UNAVAILABLE")
            self.assertEqual(lost, [])
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client("127.0.0.1:1", tls_ca=os.path.join(self.cluster.dir, "no-ca.pem"))
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertIn("tls_ca: cannot read", raised.exception.message)
        # A device is read up to a bound, not until memory runs out.
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client("127.0.0.1:1", tls_ca="/dev/zero")
        self.assertIn("tls_ca: '/dev/zero' holds more than 1048576 bytes",
                      raised.exception.message)
        # A certificate block that does not parse, as the CLI's OpenSSL check finds.
        garbled = os.path.join(self.cluster.dir, "garbled-ca.pem")
        with open(garbled, "w") as file:
            file.write("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n"
                       "-----END CERTIFICATE-----\n")
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client("127.0.0.1:1", tls_ca=garbled)
        self.assertIn("holds a PEM certificate that does not parse", raised.exception.message)
        # Only paths: an int or a bool would be opened as a file descriptor (True: stdout)
        # and closed after reading it.
        for kwargs, says in (({"tls_ca": True}, "tls_ca: expected a path, got bool True"),
                             ({"tls_ca": ["ca.pem"]}, "tls_ca: expected a path, got list"),
                             ({"token_file": 0}, "token_file: expected a path, got int 0"),
                             ({"tls_ca": "ca\0.pem"}, "tls_ca: 'ca\\x00.pem' holds a NUL")):
            with self.assertRaises(shardwise.ShardwiseError, msg=says) as raised:
                shardwise.Client("127.0.0.1:1", **kwargs)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT", says)
            self.assertIn(says, raised.exception.message)
        os.fstat(0)
        os.fstat(1)  # still open
        # A real CA parses, given as a pathlib.Path too.
        ca = os.path.join(self.cluster.dir, "ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                        os.path.join(self.cluster.dir, "ca.key"), "-out", ca, "-subj",
                        "/CN=shardwise-test-ca", "-days", "1"], check=True, capture_output=True)
        with shardwise.Client("127.0.0.1:1", tls_ca=pathlib.Path(ca)) as client:
            self.assertEqual(client.address, "127.0.0.1:1")

    def test_arguments_of_the_wrong_type_are_refused_naming_them(self):
        """Refused before any call as the coordinator refuses a bad field, not with
        protobuf's TypeError or ValueError."""
        vic = self.cluster.client("vic")
        for call, says in (
                (lambda: vic.get(123), "job_id: expected a string, got int 123"),
                (lambda: vic.cancel(None), "job_id: expected a string, got NoneType None"),
                (lambda: vic.scale("job-1", "3"), "replicas: expected an integer, got str '3'"),
                (lambda: vic.scale("job-1", True), "replicas: expected an integer, got bool"),
                (lambda: vic.scale("job-1", 1 << 40),
                 "replicas: 1099511627776 does not fit a 32-bit integer"),
                (lambda: vic.list(limit="5"), "limit: expected an integer, got str '5'"),
                (lambda: vic.list(states=3.5), "states: expected a name or a list of names"),
                (lambda: vic.list(states=[True]), "states: unknown value True"),
                (lambda: vic.set_hook("job-1", None), "hook: expected a string, got NoneType"),
                (lambda: vic.submit(spec(), request_id=5), "request_id: expected a string"),
                (lambda: vic.watch(7), "job_id: expected a string, got int 7"),  # at once
                (lambda: vic.watch("job-1", timeout="5"),
                 "timeout: expected a number of seconds, got str '5'"),
                (lambda: vic.watch("job-1", timeout=0), "timeout: 0 seconds is not above 0"),
                (lambda: vic.watch("job-1", timeout=10**400), "seconds is not above 0 and finite"),
                (lambda: vic.watch("job-1", on_lost=3), "on_lost: expected a callable, got int"),
                (lambda: vic.workers(limit=-1), "limit: -1 is negative"),
                (lambda: vic.get("job-\udcff"), "is not text UTF-8 can carry"),
                (lambda: vic.submit("spec\0.yaml"), "a path holds no NUL character"),
                (lambda: vic.timeline(b"job-1"), "job_id: expected a string, got bytes")):
            with self.assertRaises(shardwise.ShardwiseError, msg=says) as raised:
                call()
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT", says)
            self.assertIn(says, raised.exception.message)
        # What stands for an integer (numpy's int64, through __index__) is one.
        class Index:
            def __index__(self):
                return 1

        self.assertEqual(len(vic.workers(limit=Index())), 1)
        self.assertEqual(shardwise.proto.job_pb2.JobState.Value("PENDING"), 1)
        self.assertTrue(all(job.state == shardwise.PENDING
                            for job in vic.list(states=Index())))
        # A lone state is a list of one, not its letters.
        alice = self.cluster.client("alice")
        waiting = alice.submit(spec(world_size=4, name="one-state"))  # one worker: it waits
        self.assertIn(waiting, [job.id for job in alice.list(states="pending")])
        self.assertNotIn(waiting, [job.id for job in alice.list(states="RUNNING")])
        alice.cancel(waiting)

    def test_a_token_file_is_read_as_the_cli_reads_it(self):
        path = os.path.join(self.cluster.dir, "alice-file.token")
        with open(path, "w") as file:
            file.write(f"  {self.cluster.tokens['alice']}\n")
        for kwargs, says in (({"token": "sw_x", "token_file": path},
                              "give token or token_file, not both"),
                             ({"token_file": "/dev/zero"},
                              "token_file: '/dev/zero' holds more than 65536 bytes"),
                             ({"token_file": os.path.join(self.cluster.dir, "none.token")},
                              "token_file: cannot read"),
                             ({"token_file": "/dev/null"},
                              "token_file: cannot read a token from '/dev/null'")):
            with self.assertRaises(shardwise.ShardwiseError, msg=says) as raised:
                shardwise.Client(self.cluster.address, **kwargs)
            self.assertEqual(raised.exception.code, "INVALID_ARGUMENT", says)
            self.assertIn(says, raised.exception.message)
        with shardwise.Client(self.cluster.address, token_file=path) as alice:
            job_id = alice.submit(spec(world_size=4, name="from-a-token-file"))
            self.assertEqual(alice.get(job_id).submitter, "alice")
            alice.cancel(job_id)

    def test_an_error_crosses_processes_intact(self):
        error = shardwise.ShardwiseError("UNAVAILABLE", "cannot reach the coordinator")
        error.request_id = "py-7"
        copy = pickle.loads(pickle.dumps(error))
        self.assertEqual((copy.code, copy.message, copy.request_id, str(copy)),
                         (error.code, error.message, error.request_id, str(error)))

    def test_a_client_let_go_leaves_no_thread_behind(self):
        before = threading.active_count()
        client = self.cluster.client("vic")
        client.workers()
        # Read from gRPC's private state: a release that moved it would read as never
        # connected, and busy or late answers would go unretried.
        self.assertTrue(client._connected())  # pylint: disable=protected-access
        channel = client._channel  # pylint: disable=protected-access
        gone = weakref.ref(client)
        del client
        gc.collect()
        self.assertIsNone(gone(), "the client outlived its caller")
        # Its channel closed with it (gRPC closes none it collects).
        with self.assertRaises(ValueError):
            channel.unary_unary("/shardwise.v1.JobService/ListWorkers")(b"")
        del channel
        # gRPC's thread that watched its channel ends at its next poll.
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(threading.active_count(), before)

    def test_a_token_is_not_sent_in_plaintext_off_loopback(self):
        # Refused before any connection: nothing listens at that address.
        with self.assertRaises(shardwise.ShardwiseError) as raised:
            shardwise.Client("192.0.2.1:7070", token="sw_secret")
        self.assertEqual(raised.exception.code, "FAILED_PRECONDITION")
        self.assertIn("refusing to send a token in plaintext", raised.exception.message)


class RetryPolicyTest(unittest.TestCase):
    """retry_policy's decisions, driven with codes and times (no coordinator)."""

    UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
    BUSY = grpc.StatusCode.RESOURCE_EXHAUSTED

    def test_the_coordinators_own_unavailable_leaves_a_restart_its_attempts(self):
        retry = retry_policy.CallRetry(start=0, repeatable=True)
        for second in range(6):  # its state file refusing writes: connected answers
            self.assertIsNotNone(retry.after(self.UNAVAILABLE, connected=True, now=second))
        # Then restarted: five attempts of its own, as gRPC's of a call.
        for second in range(6, 10):
            self.assertIsNotNone(retry.after(self.UNAVAILABLE, connected=False, now=second))
        self.assertIsNone(retry.after(self.UNAVAILABLE, connected=False, now=10))

    def test_a_restart_after_busy_answers_is_asked_five_times_as_the_cpp_client_does(self):
        retry = retry_policy.CallRetry(start=0, repeatable=True)
        for second in range(4):  # busy four times: asked again each time
            self.assertIsNotNone(retry.after(self.BUSY, connected=True, now=second))
        # Then unreachable: four more attempts after this one, as gRPC's five of a call.
        for second in range(4, 8):
            self.assertIsNotNone(retry.after(self.UNAVAILABLE, connected=False, now=second))
        self.assertIsNone(retry.after(self.UNAVAILABLE, connected=False, now=8))

    def test_what_is_asked_again_and_what_is_the_callers(self):
        def first(code, connected=True, repeatable=True, now=0):
            return retry_policy.CallRetry(0, repeatable).after(code, connected, now)

        self.assertIsNotNone(first(self.BUSY, repeatable=False))  # never ran
        self.assertIsNone(first(self.BUSY, now=retry_policy.BUSY_RETRY_SECONDS))  # past budget
        late = grpc.StatusCode.DEADLINE_EXCEEDED
        self.assertIsNotNone(first(late))
        self.assertIsNone(first(late, connected=False))  # a wrong address is told at once
        self.assertIsNone(first(late, repeatable=False))  # a second set_hook is refused
        self.assertIsNotNone(first(self.UNAVAILABLE))  # the coordinator's own answer
        # ... for two minutes, not for good (its state file refusing writes until made room).
        self.assertIsNone(first(self.UNAVAILABLE, now=retry_policy.BUSY_RETRY_SECONDS))
        self.assertIsNone(first(self.UNAVAILABLE, repeatable=False))
        self.assertIsNone(first(grpc.StatusCode.INVALID_ARGUMENT))
        # gRPC's own refusal of a request over the size limit is met again: told at once.
        self.assertIsNone(retry_policy.CallRetry(0, True).after(
            self.BUSY, True, 0, "Received message larger than max (5242880 vs. 4194304)"))
        pauses = retry_policy.CallRetry(0, True)
        self.assertEqual([pauses.after(self.BUSY, True, 0) for _ in range(7)],
                         [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0])

    def test_a_watch_waits_for_room_and_follows_a_restart_once_updated(self):
        waiting = retry_policy.WatchRetry()
        for second in range(3):
            self.assertIsNotNone(waiting.after(self.BUSY, now=second))
        for second in range(3, 7):
            self.assertIsNotNone(waiting.after(self.UNAVAILABLE, now=second))
        self.assertIsNone(waiting.after(self.UNAVAILABLE, now=7))  # five in a row, no update
        updated = retry_policy.WatchRetry()
        updated.update()
        for second in range(0, 600, 60):  # ten minutes of lost contact
            self.assertIsNotNone(updated.after(self.UNAVAILABLE, now=second))
        self.assertIsNone(updated.after(self.UNAVAILABLE, now=600))
        updated.update()  # contact back: the budget counts again from the next failure
        self.assertIsNotNone(updated.after(grpc.StatusCode.CANCELLED, now=900))
        self.assertIsNone(updated.after(grpc.StatusCode.NOT_FOUND, now=901))


if __name__ == "__main__":
    unittest.main()
