"""The heap policy of a replay process (replay.heap_policy): with it the process reuses freed
memory instead of faulting it in again; a dataset, a server and the replay-server command apply
it by default, and not when told not to. Each case runs in a fresh process, since the policy is
the whole process's."""
import subprocess
import sys
import textwrap

# Allocates and frees 64 MB (or `megabytes`) in 1 MB blocks twice, then counts the page faults of allocating it
# a third time: memory returned to the kernel must be faulted in again, 256 faults a block.
_PROBE = textwrap.dedent("""
    import resource

    def faults_of_reallocating(megabytes=64):
        for _ in range(2):
            blocks = [bytearray(1 << 20) for _ in range(megabytes)]
            del blocks
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blocks = [bytearray(1 << 20) for _ in range(megabytes)]
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
""")


def _run(body: str, prelude: str = "") -> list:
    out = subprocess.run([sys.executable, "-c", _PROBE + prelude + textwrap.dedent(body)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_freed_memory_is_reused_under_the_policy_and_faulted_in_again_without_it():
    default, = _run("print(faults_of_reallocating())")
    applied, again, faults = _run("""
        from replay.heap_policy import keep_freed_heap_memory
        print(keep_freed_heap_memory(), keep_freed_heap_memory(), faults_of_reallocating())
    """)
    assert int(default) > 4000  # 64 MB went back to the kernel
    assert applied == again == "True"
    assert int(faults) < 100


# The same from a thread of its own, 200 MB: other threads allocate from arenas of 64 MB heaps,
# which glibc unmaps or shrinks when they are free whatever the trim threshold (the dataset's
# reader threads hit this with every response).
_THREAD_PROBE = textwrap.dedent("""
    import threading

    def faults_of_reallocating_in_a_thread():
        counted = []
        thread = threading.Thread(target=lambda: counted.append(faults_of_reallocating(200)))
        thread.start()
        thread.join()
        return counted[0]
""")


def test_a_thread_reuses_its_arenas_freed_heaps_under_the_policy():
    default, = _run("print(faults_of_reallocating_in_a_thread())", _THREAD_PROBE)
    faults, = _run("""
        from replay.heap_policy import keep_freed_heap_memory
        keep_freed_heap_memory()
        print(faults_of_reallocating_in_a_thread())
    """, _THREAD_PROBE)
    assert int(default) > 4000  # heaps of the thread's arena went back to the kernel
    assert int(faults) < 100


def test_a_dataset_applies_the_policy_by_default_and_not_when_told_not_to():
    script = """
        import numpy as np
        import tensorflow as tf
        from replay import Fifo, MinSize, Server, Table, Uniform, heap_policy
        from replay.dataset import ReplayDataset

        server = Server([Table("t", Uniform(seed=0), Fifo(), 100, MinSize(1))], keep_freed_heap_memory=False)
        with server.localhost_client().trajectory_writer(num_keep_alive_refs=1) as writer:
            for i in range(10):
                writer.append(np.full(4, i, np.float32))
                writer.create_item("t", 1.0, writer.history[-1])
        for options in ({"keep_freed_heap_memory": False}, {}):
            dataset = ReplayDataset(f"localhost:{server.port}", "t", tf.float32, [4], 4, **options)
            sample = next(iter(dataset))
            print(heap_policy._applied, float(sample.data[0]) in range(10))
            dataset.close()
        print(faults_of_reallocating())
        server.stop()
    """
    without, read, with_, read_again, faults = _run(script)
    assert (without, with_) == ("False", "True")
    assert read == read_again == "True"
    assert int(faults) < 100


def test_a_server_and_the_command_apply_the_policy_by_default_and_not_when_told_not_to():
    script = """
        from replay import Fifo, MinSize, Server, Table, Uniform, heap_policy
        from replay.server_main import _parser

        def table():
            return Table("t", Uniform(seed=0), Fifo(), 100, MinSize(1))

        Server([table()], keep_freed_heap_memory=False).stop()
        print(heap_policy._applied)
        print(_parser().parse_args(["--config", "x"]).keep_freed_heap_memory,
              _parser().parse_args(["--config", "x", "--no-keep-freed-heap-memory"])
              .keep_freed_heap_memory)
        server = Server([table()])
        print(heap_policy._applied, faults_of_reallocating())
        server.stop()
    """
    plain, command_default, opted_out, asked, faults = _run(script)
    assert (plain, asked) == ("False", "True")
    assert (command_default, opted_out) == ("True", "False")
    assert int(faults) < 100
