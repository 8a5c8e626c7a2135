"""test_interrupt.py -- Ctrl-C stops a run: the module puts a SIGINT handler in front of
Python's that calls red_interrupt on the main thread's running context, so a long run
returns at once and Python raises KeyboardInterrupt; the context stays usable."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

CHILD = textwrap.dedent("""
    import signal, sys, time
    # a child of a background job starts with SIGINT ignored: take Python's handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import redjit
    ctx = redjit.Context(device="cpu")
    print("running", flush=True)
    t0 = time.time()
    try:
        # 2^34 elements: minutes on a CPU, so only Ctrl-C ends it in time
        ctx.eval("sum(i*1.0) over i in 0..n", n=2**34)
        print("finished")
    except KeyboardInterrupt:
        print("KeyboardInterrupt %.2f" % (time.time() - t0))
    print("after", ctx.eval("sum(i) over i in 0..10"))
""")


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_ctrl_c_stops_a_run():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=os.environ)
    try:
        assert p.stdout.readline().strip() == "running"
        time.sleep(0.5)   # into red_run
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    lines = out.split("\n")
    assert lines[0].startswith("KeyboardInterrupt"), out
    assert float(lines[0].split()[1]) < 30, out
    assert lines[1] == "after 45", out
    assert p.returncode == 0, out
