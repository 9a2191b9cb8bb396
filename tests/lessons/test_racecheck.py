"""racecheck names data races and divergent barriers at the kernel's lines; the simulator's scheduler
runs a block's threads in a chosen order; shared memory, atomics, row views and slices are recorded."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.lessons import racecheck, simsched, threadviz
from tests.lessons import race_kernels as k
from tests.lessons.race_kernels import N, line_of

simulator = pytest.mark.skipif(not device.SIMULATOR, reason="the race check runs in the simulator")


def scan_args():
    return np.arange(1, N + 1, dtype=np.int64), np.zeros(N, np.int64)


@simulator
def test_correct_scan_has_no_race_in_any_order():
    values, out = scan_args()
    report = racecheck.run(k.scan_right, 1, N, values, out, names=["values", "out"], orders=3)
    assert report.ok is True and report.messages() == [] and report.races == [] and report.divergence == []
    assert out.tolist() == np.cumsum(values).tolist()
    assert list(report.outcomes) == ["forward", "reverse", "shuffle:0"] and report.differences == []
    shared = report.trace.of("s")
    assert shared and {a.space for a in shared} == {"shared"} and report.trace.shared["s"].line > 0
    assert max(a.interval for a in shared) == 2 * 4 + 1     # the first barrier, then two per round


@simulator
def test_scan_missing_barrier_is_named_at_its_lines_on_every_run():
    read, write = (line_of(k.scan_no_barrier_between_read_and_write, m) for m in ("read", "write"))
    orders = ["forward", "reverse", "shuffle:3", "shuffle:7"]
    for run in range(20):
        report = racecheck.run(k.scan_no_barrier_between_read_and_write, 1, N, *scan_args(),
                               orders=[orders[run % 4]])
        assert report.ok is False and len(report.races) == 1, run
        (race,) = report.races
        assert race.array == "s" and (race.first.kind, race.second.kind) == ("read", "write")
        assert (race.first.line, race.second.line) == (read, write)
        assert race.message == (
            f"thread (0, 1) read s[0] at line {read} (`add = s[t - offset]`) while thread (0, 0) wrote it at "
            f"line {write} (`s[t] += add`), with no `cuda.syncthreads()` between: put one between line {read} "
            f"and line {write}")
        assert report.messages() == [race.message]


@simulator
def test_a_race_changes_the_result_under_another_order_and_args_keep_the_first():
    values, out = scan_args()
    report = racecheck.run(k.scan_no_barrier_between_read_and_write, 1, N, values, out, orders=2)
    forward, reverse = report.outcomes["forward"]["out"], report.outcomes["reverse"]["out"]
    assert out.tolist() == forward.tolist() != reverse.tolist()
    assert reverse.tolist() == np.cumsum(values).tolist()       # last thread first: reads before writes
    assert report.differences and "depends on the thread order" in report.differences[0]
    assert report.messages()[-1] == report.differences[0]
    right = racecheck.run(k.scan_right, 1, N, *scan_args(), orders=2)
    assert right.outcomes["forward"]["out"].tolist() == right.outcomes["reverse"]["out"].tolist()


@simulator
def test_reduction_missing_the_barrier_between_rounds():
    line = line_of(k.reduce_no_barrier_in_loop, "sum")
    for _ in range(20):
        report = racecheck.run(k.reduce_no_barrier_in_loop, 1, N, np.arange(N, dtype=np.float32),
                               np.zeros(1, np.float32))
        (race,) = report.races
        assert race.first.where == race.second.where and race.first.run != race.second.run
        assert f"at line {line} (`s[t] = s[t] + s[t + half]`)" in race.message
        assert race.message.endswith(f"put one after line {line}, so that it ends each round of the loop "
                                     "(outside any `if`: every thread must reach it)")


@simulator
def test_write_write_across_blocks_on_global_memory():
    line = line_of(k.every_block_writes_the_same, "write")
    for _ in range(20):
        report = racecheck.run(k.every_block_writes_the_same, 2, 4, np.zeros(4, np.int64))
        (race,) = report.races
        assert race.array == "out" and race.elements == (0, 1, 2, 3)
        assert race.message.startswith(f"thread (0, 0) wrote out[0] at line {line}")
        assert "also wrote it" in race.message and "different blocks" in race.message


@simulator
def test_write_write_in_one_block_on_one_line():
    report = racecheck.run(k.all_write_one_element, 1, 4, np.zeros(1, np.int64))
    (race,) = report.races
    assert "in the same barrier interval" in race.message and "one writing thread" in race.message


@simulator
def test_atomics_alone_never_race_but_a_plain_read_of_their_element_does():
    values, total, biggest = np.arange(16, dtype=np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
    report = racecheck.run(k.atomics_only, 2, 8, values, total, biggest, orders=3)
    assert report.ok is True and (total[0], biggest[0]) == (120, 15)
    assert {a.op for a in report.trace.of("total", "atomic")} == {"add"} and not report.trace.of("total", "write")
    add, read = (line_of(k.atomic_then_plain_read, m) for m in ("add", "read"))
    for _ in range(20):
        report = racecheck.run(k.atomic_then_plain_read, 1, 8, np.arange(8, dtype=np.int64), np.zeros(1, np.int64),
                               np.zeros(8, np.int64))
        (race,) = report.races
        assert f"read total[0] at line {read}" in race.message
        assert f"updated it with `cuda.atomic.add` at line {add}" in race.message
        assert race.message.endswith(f"put one between line {add} and line {read}")


@simulator
def test_barrier_inside_if_is_divergence():
    line = line_of(k.barrier_inside_if, "barrier")
    for _ in range(20):
        report = racecheck.run(k.barrier_inside_if, 1, N, np.arange(N, dtype=np.int64), np.zeros(N, np.int64))
        (div,) = report.divergence
        assert (div.line, div.reached, div.total, div.block) == (line, 8, 16, (0, 0, 0))
        assert div.message.startswith(f"cuda.syncthreads() at line {line} was reached by 8 of 16 threads of "
                                      "block (0,): a barrier inside `if` that not every thread takes is undefined "
                                      "behaviour (it can hang on a GPU)")
        assert report.ok is False and div.message in report.messages()


@simulator
def test_threads_that_return_before_a_barrier_and_barriers_in_both_branches():
    report = racecheck.run(k.return_before_barrier, 1, N, np.arange(N, dtype=np.int64), np.zeros(N, np.int64))
    (div,) = report.divergence
    assert (div.reached, div.total) == (12, 16) and "4 finished without reaching it" in div.message
    even, odd = (line_of(k.barriers_in_both_branches, m) for m in ("even", "odd"))
    report = racecheck.run(k.barriers_in_both_branches, 1, 8, np.arange(8, dtype=np.int64), np.zeros(8, np.int64))
    assert sorted((d.line, d.reached) for d in report.divergence) == [(even, 4), (odd, 4)]
    assert f"4 waited at line {odd}" in report.divergence[0].message


@simulator
def test_syncthreads_count_and_or_reduce_over_the_block():
    counts = np.zeros(3, np.int64)
    report = racecheck.run(k.count_with_barrier, 1, 8, np.array([1, 0, 1, 1, 0, 0, 1, 0]), counts, orders=3)
    assert report.ok is True and counts.tolist() == [4, 0, 1]


@simulator
def test_row_views_and_slices_map_to_the_flat_index_of_their_array():
    tags = np.arange(10, dtype=np.int64).reshape(2, 5)
    positions, slots = np.array([[1, 3, 9], [5, 7, 0]]), np.zeros((2, 3), np.int64)
    report = racecheck.run(k.row_view, 2, 3, tags, positions, slots)
    assert report.ok is True and slots.tolist() == [[1, 3, -1], [0, 2, -1]]
    assert {(a.block[0], a.index) for a in report.trace.of("tags", "read")} == \
        {(r, 5 * r + s) for r in range(2) for s in range(5)}
    assert {a.line for a in report.trace.of("tags")} == {line_of(k.row_view, "row")}
    a, out = np.arange(12, dtype=np.int64), np.zeros((2, 8), np.int64)
    trace = threadviz.record(k.slices_and_rows, 1, 8, a, out)
    assert out[1].tolist() == [2 * v for v in range(2, 10)] and not out[0].any()
    assert sorted({x.index for x in trace.of("a")}) == list(range(2, 10))
    assert sorted(x.index for x in trace.of("out", "write")) == list(range(8, 16))


@simulator
def test_out_of_bounds_row_is_logged_not_performed():
    out = np.zeros(3, np.int64)
    trace = threadviz.record(k.out_of_bounds_row, 1, 3, np.arange(10).reshape(2, 5), out)
    (oob,) = trace.out_of_bounds()
    assert (oob.buffer, oob.kind, oob.thread[0], oob.index) == ("tags", "read", 2, 10)
    assert out.tolist() == [0, 5, 0]


@simulator
def test_shared_two_dimensional_tile():
    a, out = np.arange(32, dtype=np.int32).reshape(4, 8), np.zeros((8, 4), np.int32)
    report = racecheck.run(k.transpose_through_shared, 1, (8, 4), a, out, orders=3)
    assert report.ok is True and (out == a.T).all()
    assert {x.index for x in report.trace.of("tile", "write")} == set(range(32))
    store, load = (line_of(k.transpose_without_barrier, m) for m in ("store", "load"))
    for _ in range(20):
        report = racecheck.run(k.transpose_without_barrier, 1, (8, 4), a, np.zeros((8, 4), np.int32))
        (race,) = report.races
        assert race.message.startswith("thread (0, (7, 3)) read tile[0, 0] at line")
        assert f"put one between line {store} and line {load}" in race.message


@simulator
def test_shared_array_names_and_lines_in_device_functions():
    trace = threadviz.record(k.unnamed_shared, 1, 4, np.zeros(4, np.int64))
    (name,) = trace.shared
    assert name == "shared array #1 (int32[4])"
    writes = trace.of(name, "write")
    assert {w.where.function for w in writes} == {"fill_dev"} and {w.line for w in writes} == \
        {line_of(k.fill_dev, "fill")}
    assert writes[0].where.at("unnamed_shared") == f"line {writes[0].line} in `fill_dev`"


@simulator
def test_a_thread_waiting_for_another_runs_its_round_together():
    flag, out = np.zeros(1, np.int64), np.zeros(1, np.int64)
    report = racecheck.run(k.thread_zero_waits_for_thread_one, 1, 2, flag, out, step_seconds=0.2)
    assert out[0] == 1 and report.trace.free_rounds == 1 and report.ok is True


@simulator
def test_a_block_waiting_for_a_later_block_stops_with_the_recorders_limit():
    with pytest.raises(threadviz.RecorderLimit, match="a block that waits for a later block"):
        simsched.record_launch(k.block_zero_waits_for_block_one, 2, 1, [np.zeros(1, np.int64), np.zeros(1, np.int64)],
                               step_seconds=0.1, stall_seconds=0.3)


@simulator
def test_endless_loops_are_stopped(monkeypatch):
    import threading

    from hisparse_numba.lessons import simtrace

    with pytest.raises(threadviz.RecorderLimit, match="a thread loops forever"):
        simsched.record_launch(k.loops_forever, 1, 2, [np.zeros(1, np.int64)], step_seconds=0.1, stall_seconds=0.3)
    monkeypatch.setattr(simtrace, "MAX_ACCESSES", 500)
    with pytest.raises(threadviz.RecorderLimit, match="more than 500 element accesses"):
        threadviz.record(k.loops_forever_reading, 1, 2, np.zeros(1, np.int64), np.zeros(1, np.int64))
    for t in threading.enumerate():
        if hasattr(t, "threadIdx"):
            t.join(5)
            assert not t.is_alive()


@simulator
def test_what_the_recorder_cannot_follow_is_its_own_limit_and_float_indices_are_the_kernels():
    with pytest.raises(threadviz.RecorderLimit, match=r"cannot follow `a.sum`.*limit of the recorder, not an error"):
        threadviz.record(k.whole_array_method, 1, 1, np.arange(4.0), np.zeros(1))
    with pytest.raises(TypeError, match="an array index must be an integer, not float"):
        threadviz.record(k.float_index, 1, 1, np.arange(4.0), np.zeros(1))


@simulator
def test_orders_are_checked():
    assert [str(o) for o in simsched.orders(4)] == ["forward", "reverse", "shuffle:0", "shuffle:1"]
    assert [str(o) for o in simsched.orders(["reverse", "shuffle:5"])] == ["reverse", "shuffle:5"]
    for bad in (0, ["sideways"], ["forward:2"]):
        with pytest.raises(ValueError, match="order"):
            simsched.orders(bad)


def test_on_a_gpu_the_kernel_runs_unchecked(monkeypatch):
    if device.SIMULATOR:                   # what a GPU does, with the launch stubbed
        launched = []
        monkeypatch.setattr(device, "SIMULATOR", False)
        monkeypatch.setattr(device, "launch", lambda *a: launched.append(a))
        monkeypatch.setattr(device, "synchronize", lambda: None)
        report = racecheck.run(k.scan_right, 1, N, *scan_args())
        assert len(launched) == 1
    else:
        values, out = scan_args()
        report = racecheck.run(k.scan_right, 1, N, values, out)
        assert out.tolist() == np.cumsum(values).tolist()
    assert report.ok is None and report.messages() == [] and report.trace is None
    assert "needs the CUDA simulator" in report.note


@simulator
def test_shared_memory_read_before_any_thread_wrote_it():
    add = line_of(k.shared_counter_never_zeroed, "add")
    for _ in range(20):
        report = racecheck.run(k.shared_counter_never_zeroed, 1, 8, np.ones(8, np.int64), np.zeros(1, np.int64))
        assert report.races == [] and report.divergence == [] and report.ok is False
        (bad,) = report.uninitialised
        assert bad.message == (f"thread (0, 0) updated (`cuda.atomic.add`) count[0] at line {add} "
                               "(`cuda.atomic.add(count, 0, values[t])`) before any thread of block (0,) wrote it: "
                               "shared memory starts as garbage; write every element first, then "
                               "`cuda.syncthreads()`")
        assert report.messages() == [bad.message]
    total = np.zeros(1, np.int64)
    report = racecheck.run(k.shared_counter_zeroed, 1, 8, np.ones(8, np.int64), total, orders=3)
    assert report.ok is True and total[0] == 8


@simulator
def test_an_error_in_one_thread_stops_the_launch():
    import threading

    with pytest.raises(ValueError, match="thread two"):
        threadviz.record(k.thread_two_raises, 1, 4, np.zeros(4, np.int64))
    assert not [t for t in threading.enumerate() if hasattr(t, "threadIdx") and t.is_alive()]


@simulator
def test_slice_assignment_negative_index_and_nbytes():
    a, out = np.arange(10, dtype=np.int64), np.full(6, -1, np.int64)
    trace = threadviz.record(k.slice_assign_and_negative_index, 1, 2, a, out)
    assert out.tolist() == [4, 5, 6, 7, 0, 80]
    assert [x.index for x in trace.of("a", "read", True)] == [4, 5, 6, 7]
    assert [x.index for x in trace.of("out", "write")] == [0, 1, 2, 3, 4, 5]
    (oob,) = trace.out_of_bounds()
    assert (oob.buffer, oob.index) == ("a", -1)


@simulator
def test_a_barrier_in_a_device_function_names_the_kernel_line_that_called_it():
    call = line_of(k.library_scan_inside_if, "call")
    out = np.zeros(N, np.int64)
    report = racecheck.run(k.library_scan_inside_if, 1, N, np.ones(N, np.int64), out)
    assert out[:8].tolist() == list(range(8))
    (div,) = report.divergence                    # one report for the four barriers of the scan
    assert div.via.line == call and div.where.function == "block_exclusive_scan_dev" and len(div.after) == 3
    assert div.message.startswith(f"cuda.syncthreads() at line {div.line} in `block_exclusive_scan_dev` of "
                                  f"blockscan.py, called from line {call} (`offset, total = "
                                  "block_exclusive_scan_dev(s, values[t], t, 8)`), was reached by 8 of 16 threads")
    assert div.message.endswith(f"the 3 barriers after it (lines {', '.join(map(str, div.after))}) were reached "
                                "by the same 8 threads")


@simulator
def test_a_race_in_a_device_function_is_placed_at_the_kernel_lines():
    put, call, read = line_of(k.put_dev, "put"), *(line_of(k.write_in_device_function_read_in_kernel, m)
                                                   for m in ("call", "read"))
    report = racecheck.run(k.write_in_device_function_read_in_kernel, 1, 4, np.zeros(4, np.int64))
    (race,) = report.races
    assert race.message == (
        f"thread (0, 3) read s[0] at line {read} (`out[t] = s[(t + 1) % 4]`) while thread (0, 0) wrote it at line "
        f"{put} in `put_dev` (`buffer[i] = value`), called from line {call} (`put_dev(s, t, t)`), with no "
        f"`cuda.syncthreads()` between: put one between line {call} and line {read}")
