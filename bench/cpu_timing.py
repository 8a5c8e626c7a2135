"""cpu_timing.py -- what bench/cpu_matmul.py and bench/cpu_scan.py share: a median time and the
markdown section they print and write."""
import statistics
import time


def median_ms(fn, reps):
    """The median of `reps` timed calls of fn, in ms, after one untimed call."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def finish(head, lines, out):
    """Print the section (head lines, then the table's), and write it to `out` when given."""
    text = "\n".join(head + lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text)
