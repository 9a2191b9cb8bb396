"""Wrong answers to 14-c, the hit test with one block per request."""

from hisparse_numba.device import cuda

from . import wrong

PUZZLE = "14-c"


def make_hit_rows(*, lane_loop=True, row_of_request=True, include_newest_column=False,
                  padding=True, newest_offset=1, serial=False):
    """The right kernel with one mistake switched on (the switches are compile-time constants)."""
    @cuda.jit
    def hit_rows(tags, locs, top_k, seq_lens, num_real, hot_buffer_size, rows):
        r = cuda.blockIdx.x
        k = cuda.threadIdx.x
        step = cuda.blockDim.x
        if serial:
            step = 1
            if k > 0:
                return
        t = r if row_of_request else 0
        while k < top_k.shape[1]:
            row = -1
            if r < num_real or not padding:
                pos = top_k[r, k]
                if pos == seq_lens[r] - newest_offset:
                    row = locs[r, hot_buffer_size]
                else:
                    for s in range(hot_buffer_size + (1 if include_newest_column else 0)):
                        if tags[t, s] == pos:
                            row = locs[r, s]
                            break
            rows[r, k] = row
            if not lane_loop:
                break
            k += step
    return hit_rows


ONE_LANE_PER_THREAD = wrong(make_hit_rows(lane_loop=False), 'case "more lanes than threads"', "no thread wrote")
REQUEST_ZERO_TAGS = wrong(make_hit_rows(row_of_request=False), "another request's row of tags",
                          gpu_says=("the lesson's example", "rows[1, 1]"))      # only the trace sees the read
SEARCHES_COLUMN_H = wrong(make_hit_rows(include_newest_column=True), "column H")
IGNORES_PADDING = wrong(make_hit_rows(padding=False), 'case "padding rows"', "a padding row")
NEWEST_IS_SEQ_LEN = wrong(make_hit_rows(newest_offset=0), "the lesson's example")
SERIAL_IN_THREAD_ZERO = wrong(make_hit_rows(serial=True), "serial", simulator_only=True)
