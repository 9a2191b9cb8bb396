"""The error catalogue: every error hisparse-numba raises, its cause, its fix and its lesson.

``pattern`` is the message as raised, with ``{name}`` for the parts that vary; ``variants`` are
the other texts sglang raises for the same mistake (its C++ ``RuntimeCheck`` texts, the MTP
kernel's, older wrappers'). ``explain`` turns a pasted message back into its entries, the most
specific first (a pattern with more fixed text wins over a generic one such as
``{name} must be contiguous``). It forgives what a paste does to a message: other whitespace, a
missing final period, a prefix (``ValueError:``, ``kv-canary:``, ``RuntimeError:``), a whole
traceback, or only a piece of the message; ``suggest`` names the nearest entries when nothing
matches. Tests check that every ``fail(...)``/``raise`` site in the package has an entry and every
entry names a lesson that exists.

``origin`` says whose text it is: ``"sglang"`` when sglang raises the same text, ``"numba"``
for Numba's own warning, ``"hisparse-numba"`` for the checks this project adds where sglang
checks nothing and a mistake corrupts memory or state silently.

Lessons 00-13 each teach one error (``lesson``); ``also`` names further lessons where the same
error matters (lesson 14, the kernel puzzles, teaches no error of its own).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace

SGLANG = "sglang"
OURS = "hisparse-numba"
NUMBA = "numba"

_PLACEHOLDER = re.compile(r"\{[a-z0-9_]+\}")


@dataclass(frozen=True)
class Entry:
    pattern: str
    cause: str
    fix: str
    lesson: str
    origin: str = SGLANG
    variants: tuple[str, ...] = ()
    also: tuple[str, ...] = ()

    @property
    def lessons(self) -> tuple[str, ...]:
        return (self.lesson, *self.also)

    def texts(self) -> tuple[str, ...]:
        return (self.pattern, *self.variants)

    def regex(self) -> re.Pattern:
        """The pattern as raised (placeholders match any text)."""
        return _text_regex(self.pattern, normalised=False)

    def specificity(self) -> int:
        """Characters of fixed text: the more, the more specific the entry."""
        return len(_PLACEHOLDER.sub("", self.pattern))

    def render(self) -> str:
        lessons = ", ".join(self.lessons)
        runs = " ".join(self.lessons)
        variants = "".join(f"\n  sglang also raises: {v}" for v in self.variants)
        return (f"{self.pattern}\n  raised by: {self.origin}{variants}\n  cause: {self.cause}\n"
                f"  fix: {self.fix}\n  lesson{'s' if self.also else ''}: {lessons} "
                f"(hisparse-numba lessons run {runs})")


def _e(pattern, cause, fix, lesson, origin=OURS) -> Entry:
    return Entry(pattern, cause, fix, lesson, origin)


CATALOGUE: list[Entry] = [
    # ---------------------------------------------------------------- HiSparse: sizes (lesson 09)
    _e("hot_buffer_size ({hot_buffer_size}) must be >= num_top_k ({num_top_k})",
       "The hot buffer has fewer slots than the attention selects per step. Every selected token "
       "that is not resident must be loaded into an evictable slot in the same step, so with H < K "
       "the misses of one step cannot all fit (and the kernel's shared-memory counters, sized for "
       "H, would be reused for K lanes).",
       "Size the hot buffer at least top_k (sglang's typical setting is H = 2 * top_k), or lower "
       "num_top_k.",
       "09", SGLANG),
    _e("num_top_k must be >= 1 and hot_buffer_size <= {max_slots} (slot ids are int16), got num_top_k={k}, hot_buffer_size={h}",
       "An empty selection, or more hot slots than an int16 slot id can name (lru_slots is int16).",
       "Use 1 <= num_top_k <= hot_buffer_size <= 32767.", "09"),
    _e("num_top_k ({k}) must match top_k_tokens.shape[1] ({width}); pass top_k_tokens[:, :{k2}] to use the first {k3} columns",
       "The kernel reads exactly num_top_k lanes per row; a narrower table would be read past its "
       "row end (into the next row), a wider one silently ignores its tail.",
       "Pass a [batch, num_top_k] view: top_k_tokens[:, :num_top_k] keeps the row stride and is accepted.",
       "09", SGLANG),
    _e("block_size must be a multiple of 32 in [32, 1024], got {block_size}",
       "A partial warp or a block larger than CUDA allows (sglang's old kernel also misbehaved below 512).",
       "Use a multiple of 32 up to 1024 (256 by default, 1024 in sglang's benchmark).", "09"),
    _e("top_k_device_locs must have shape [batch={batch}, >= num_top_k={k}], got {got}",
       "The output table has fewer rows than the batch or fewer than num_top_k columns: the kernel "
       "would write past it.",
       "Allocate top_k_device_locs as [batch, num_top_k] int32.", "09"),
    _e("device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1] (hot_buffer_size {h}), got {got}",
       "The tag table does not cover the hot buffer (hot_buffer_size columns plus the newest-token page).",
       "Allocate [requests, hot_buffer_size + page_size] int32, as the coordinator does.", "09"),
    _e("device_buffer_locs must have shape [requests={requests}, >= hot_buffer_size + 1 = {h1}] (column {h} holds the newest token's row), got {got}",
       "The slot-to-row table has no column H for the newest token, or a different number of request rows.",
       "Allocate device_buffer_locs with the shape of device_buffer_tokens ([requests, H + page_size]).",
       "09"),
    _e("device_buffer_locs row stride ({a} elements) must equal device_buffer_tokens row stride ({b} elements): sglang indexes both tables with the tags' stride, so a different shape reads wrong rows",
       "sglang's kernel indexes the locs table with the tags' row stride; a table of another width "
       "returns the physical rows of other requests, silently.",
       "Allocate both tables with the same shape (or slice both the same way).", "07"),
    _e("lru_slots must have shape [requests={requests}, >= hot_buffer_size={h}], got {got}",
       "The LRU table does not hold one permutation of the H slots per request row.",
       "Allocate [requests, hot_buffer_size] int16 and initialise each row to arange(H).", "09"),
    _e("host_cache_locs must be C-contiguous: sglang uses shape[1] as its row stride, got {got} with strides {strides} bytes",
       "A sliced view of a wider table: sglang's kernel assumes the row stride equals shape[1] and "
       "would read other requests' host rows.",
       "Pass a contiguous table (np.ascontiguousarray / cupy.ascontiguousarray).", "09"),
    _e("{name} must have shape [batch={batch}], got {got}",
       "req_pool_indices or seq_lens does not hold one entry per batch row.",
       "Give one request row and one sequence length per row of top_k_tokens.", "09"),
    _e("num_real_reqs must be a [1] int32 device array, got the Python value {value}",
       "The number of real rows is read by the kernel from device memory (so that a captured CUDA "
       "graph can change it); a Python int cannot be.",
       "Pass device.to_device(np.array([n], np.int32)), or None for 'every row is real'.", "08"),
    _e("num_real_reqs must be an int32 array with shape [1], got {got}",
       "num_real_reqs has another dtype or shape (an int64 tensor would be reinterpreted).",
       "A [1] int32 device array, updated before each launch or graph replay.", "08"),
    _e("num_real_reqs[0] = {value} must be in [0, batch={batch}]",
       "More real rows than the batch: the kernel would process rows that do not exist.",
       "Set num_real_reqs[0] to the number of real rows (padding rows follow them).", "08"),
    _e("num_real_reqs[0] = {value} must be >= 0",
       "A negative number of rows to replay.", "Set num_real_reqs[0] to the number of real rows.", "08"),
    _e("num_real_reqs must have at least one element",
       "An empty num_real_reqs array.", "Pass a [1] int32 device array.", "08"),
    _e("num_blocks must be >= 1, got {num_blocks}",
       "A replay launched with no blocks (an invalid launch configuration on CUDA).",
       "Use num_blocks >= 1 (sglang's coordinator uses 4).", "09"),

    # ---------------------------------------------------------------- generic argument checks (09)
    _e("{name} must have dtype {dtype}, got {got}",
       "An index table of the wrong dtype. sglang reinterprets the bytes without a check (an int64 "
       "top-k from torch.topk is read as pairs of int32 positions).",
       "Convert to the dtype named in the message (see the launcher's docstring for the table).",
       "09"),
    _e("{name} must have shape {layout}, got {got}",
       "An argument with the wrong number of dimensions or the wrong extent.",
       "Allocate it with the shape named in the message.", "09"),
    _e("{name} rows must be contiguous (inner stride 1), got strides {strides} bytes",
       "A column-strided view: the kernels index a row as consecutive elements.",
       "Pass a view whose last axis is dense (slicing columns x[:, :k] is fine, x[:, ::2] is not).",
       "07"),
    _e("{name} must be C-contiguous, got strides {strides} bytes",
       "A pool or table that is not one dense block: items are addressed as base + index * size.",
       "Pass a contiguous array (ascontiguousarray) or allocate it whole.", "10"),
    _e("{name} must have shape [>= {n}, >= hot_buffer_size {hot}], got {got}",
       "A speculative slot table that does not cover the state's requests or hot buffer.",
       "Allocate [num_requests, >= hot_buffer_size + 1] tables, as for the single-step swap-in.", "01"),

    # ---------------------------------------------------------------- item copies (lesson 10)
    _e("The pointers must be multiple of 16 bytes.",
       "item_size_bytes, or the base address of the host pool or device buffer, is not a multiple "
       "of 16. The item copy moves 16-byte chunks (sglang: 128-bit vector loads): a 584-byte item "
       "leaves 8 bytes that do not form a chunk, and an 8-byte-offset base makes every 16-byte "
       "access misaligned (a CUDA misaligned-address fault). The text is sglang's (its activation "
       "ops); sglang's HiSparse itself does not check and faults or drops the tail.",
       "Pad items to a multiple of 16 bytes (e.g. 592 for a 584-byte item), and allocate pools "
       "with device.host_cache_array / a fresh device array instead of slicing at odd offsets.",
       "10", SGLANG),
    _e("{name} holds {nbytes} bytes, but item {item} of {size} bytes needs {need}",
       "A location points past the end of the pool (or the pool is smaller than the item size "
       "times the rows used): the copy would read or write out of bounds.",
       "Size the pool for every row that the tables can name, or fix the location tables.", "10"),
    _e("kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, got {n}",
       "The real-KV hash reads 16-byte chunks per token.",
       "Use a multiple of 16, or pass no source for a pool whose layout is not 16-aligned (e.g. "
       "DSv4's 584 bytes per token).", "10", SGLANG),
    _e("kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in (0, num_bytes_per_token={n}], got {read}",
       "read_bytes is not a whole number of 16-byte chunks, or exceeds the token's bytes.",
       "Use a multiple of 16 no larger than num_bytes_per_token.", "10", SGLANG),
    _e("kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got {row} bytes (shape={shape}, dtype={dtype})",
       "Rows of the KV view start at addresses that are not 16-aligned.",
       "View the KV layer so its row pitch is a multiple of 16 bytes.", "10", SGLANG),
    _e("kv-canary: RealKvSource.tensor base address must be a multiple of 16 bytes",
       "The KV view starts at an address that is not 16-aligned (a slice at an odd offset).",
       "Pass the layer's own allocation, not an offset slice.", "10"),
    _e("kv-canary: RealKvSource.page_size must be >= 1, got {p}",
       "A real-KV source with no tokens per row.", "Use the pool's page size (1 for token pools).",
       "10", SGLANG),
    _e("kv-canary: RealKvSource.tensor must be at least 2-D, got shape {shape}",
       "The KV view is not [rows, bytes].", "View the KV layer as [rows, bytes].", "10", SGLANG),
    _e("kv-canary: RealKvSource.tensor must be C-contiguous, got strides {strides} bytes",
       "The KV view is not one dense block.", "Pass a contiguous KV layer.", "10"),
    _e("kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is {row} bytes but page_size={p} x num_bytes_per_token={n} needs {need}",
       "page_size or num_bytes_per_token does not describe this view.",
       "Pass the page size and bytes per token of the view you hand in.", "10", SGLANG),
    _e("kv-canary: canary_buf slot stride must hold at least 4 int64 fields, got {n}",
       "A canary buffer narrower than 32 bytes per slot (token, position, prev_hash, real_kv_hash).",
       "Allocate [num_slots, 32] uint8 (VerifyOrWriteContext.allocate does).", "10", SGLANG),
    _e("kv-canary: canary_buf rows must be whole int64 fields (stride and base multiples of 8 bytes), got {got}",
       "Canary fields are read as int64 words; a row pitch or base that is not a multiple of 8 splits them.",
       "Allocate the canary buffer with VerifyOrWriteContext.allocate.", "10"),

    # ---------------------------------------------------------------- host memory (lesson 11)
    _e("Host array used in CUDA kernel will incur copy overhead to/from device.",
       "A plain (pageable, or pinned but unmapped) NumPy array was passed to a Numba kernel on a GPU: "
       "Numba copies the WHOLE array to the device before the launch and back after it, on every "
       "launch. For a host KV pool that is gigabytes per step instead of the few items the kernel "
       "reads (a NumbaPerformanceWarning, not an error).",
       "Allocate the host KV pool with device.host_cache_array (mapped pinned memory: kernels read "
       "it in place over PCIe).",
       "11", NUMBA),
    _e("host_cache must be device-readable host memory (device.host_cache_array), got {type_name}",
       "A host pool that the kernel cannot read in place (Numba would copy it both ways per launch).",
       "Allocate it with device.host_cache_array.", "11"),
    _e("device_buffer must be a device array, got {type_name}",
       "A NumPy array on a GPU machine: Numba would copy it to the device and back on every launch.",
       "Pass a device (CuPy) array: device.to_device(a) or device.xp.zeros(...).", "11"),
    _e("HISPARSE_NUMBA_BACKEND must be one of {choices}, got {choice}",
       "An unknown backend name in the environment.",
       "Use auto, cuda, simulator or compile-only.", "00"),
    _e("HISPARSE_NUMBA_BACKEND=cuda but no CUDA device is usable on this machine",
       "The GPU world was requested on a machine without a usable CUDA driver or device.",
       "Unset HISPARSE_NUMBA_BACKEND (auto picks the simulator) or run on a GPU; "
       "`hisparse-numba doctor` shows what was found.", "00"),
    _e("a CUDA GPU is usable but CuPy is not installed: pip install 'hisparse-numba[cuda12]' or '[cuda13]' (the CUDA major of your driver), or set HISPARSE_NUMBA_BACKEND=simulator",
       "A GPU was found, so the cuda world was chosen, but its device arrays (CuPy) are missing.",
       "Install the CuPy extra for your driver's CUDA major (make lessons CUDA=12 / CUDA=13), or force "
       "the simulator.", "00"),
    _e("HISPARSE_NUMBA_BACKEND=cuda but NUMBA_ENABLE_CUDASIM=1 is set",
       "Two contradicting world choices in the environment.",
       "Unset NUMBA_ENABLE_CUDASIM, or choose the simulator.", "00"),

    # ---------------------------------------------------------------- gather and swap-in data (00)
    _e('checks must be "full" or "shapes", got {got}',
       "An unknown value-check mode for a single-step launcher.",
       'Leave the default checks="full"; pass checks="shapes" only when the index values were '
       "validated upstream (then a bad value corrupts memory silently).", "00"),
    _e("{name} must be an integer, got {value} ({type})",
       "A float, string, bool or None where a count or size is expected; it is rejected, not "
       "rounded (16.5 is not 16).", "Pass a Python or NumPy integer.", "00"),
    _e("{name} must be True or False, got {value} ({type})",
       "A flag given as something other than a bool.", "Pass True or False.", "00"),
    _e("{name} must be an array (NumPy, CuPy or a host_cache_array), got {type}",
       "A list, scalar, string or None where the launcher needs an array.",
       "Pass a device array (CuPy on a GPU, NumPy in the simulator) or the host pool.", "00"),
    _e("{name} has {n} rows, but {others} have {m} (the {role}); got {got}",
       "Arrays that describe the same batch (or the same request rows) disagree on their row count; "
       "the one named differs from the others.", "Pass the same rows to all of them.", "00"),
    _e("{name} shares memory with {other}; the call writes {name2}, so it must be a buffer of its own",
       "An output passed as (or overlapping) another argument: the kernel would read what it "
       "has just written.", "Give every output its own buffer.", "00"),
    _e("{pool} holds {n} bytes, but {entry} = {value} needs item {item} of {size} bytes",
       "An index past the end of the host or device pool: the copy would read or write outside it.",
       "Index only items of the pool (or allocate the pool for every row the tables name).", "00"),
    _e("req_pool_indices maps batch rows {a} and {b} to request row {rid}; each real batch row must own its request row (a long-path row updates its tags and LRU)",
       "Two batch rows share one request's slot tables: their tag and LRU updates would race.",
       "Give each batch row its own request row.", "00"),
    _e("seq_lens[{b}] = {n} is negative; a sequence length is >= 0",
       "A corrupted or uninitialised sequence length.", "Pass the number of tokens of each request.", "00"),
    _e("device_buffer_locs[{rid}, {p}] = {loc} is negative; every hot slot needs a device row >= 0 (a miss is copied into it)",
       "A hot slot without a physical row: a miss into it would write before the buffer.",
       "Map every hot slot to a device row before the swap-in.", "00"),
    _e("device_buffer_locs[{a}, {p}] and device_buffer_locs[{b}, {q}] are both device row {row}; every hot slot needs a device row of its own (two misses into one row race)",
       "Two hot slots (of one request or of two) share one device row: misses copied into both race.",
       "Give every hot slot of every request its own device row.", "00"),
    _e("src_locs and dst_locs must have the same shape, got {a} and {b}",
       "Each copy needs one source and one destination.", "Pass equally long location arrays.", "00"),
    _e("src_locs and dst_locs must be >= 0 (a -1 location has no item)",
       "-1 marks 'no item'; copying it would read the item before the pool (Python-style wrap).",
       "Filter out -1 entries before gathering.", "00"),
    _e("dst_locs must be distinct: two items copied to one row race",
       "Two copies into one row: which one lands depends on scheduling.",
       "Give every copy its own destination row.", "00"),
    _e("req_pool_indices[{b}] = {rid} is outside [0, {requests}) (rows of device_buffer_tokens)",
       "A batch row names a request-pool row that the slot tables do not have.",
       "Pass request-pool rows in [0, requests).", "00"),
    _e("top_k_tokens row {b} (fast path, seq_len {n}) selects positions {bad} >= seq_len; the fast path reads device_buffer_locs[rid, position] unchecked",
       "On the fast path (seq_len <= H) position p lives in slot p; a position past the sequence "
       "reads a slot that holds no token of this request.",
       "Select only positions < seq_len (or -1 for an empty lane).", "00"),
    _e("top_k_tokens row {b} (long path, seq_len {n} > hot_buffer_size {h}) holds positions {bad} outside [0, seq_len): every lane of a long-path row must be a valid position",
       "A -1 or out-of-range lane on the long path. sglang counts such a lane as a miss without "
       "assigning it: phantom copies into unassigned slots and stale outputs "
       "(docs/hisparse-single-step.md#what-sglang-leaves-unchecked).",
       "Fill every lane of a long-path row with a valid position (only the fast path tolerates -1).",
       "00"),
    _e("top_k_tokens row {b} (long path) holds duplicate positions {dups}: the positions of a long-path row must be distinct",
       "A position selected twice is loaded into two slots (duplicate tags); the next step's miss "
       "count is then one short and one miss gets a slot but no bytes.",
       "Deduplicate the selection (a top-k selector returns distinct positions).", "00"),
    _e("lru_slots row {rid} is not a permutation of 0..{h} (initialise it to arange(hot_buffer_size))",
       "An uninitialised or corrupted LRU row: a slot listed twice is handed to two misses, a "
       "negative slot indexes out of bounds.",
       "Initialise every row to arange(H) (int16) and reset it when a request finishes.", "00"),
    _e("device_buffer_tokens row {rid} holds positions {dups} in more than one slot; a position may be resident in one slot only",
       "Duplicate tags: both slots would hit the same lane and the miss count would be wrong.",
       "Tags must name each position at most once (-1 for empty slots).", "00"),
    _e("top_k_tokens row {b} (seq_lens[{b2}] = {n}) misses positions {bad} beyond host_cache_locs ({got})",
       "A miss at a position past the host table's width: no host row can be looked up.",
       "Widen host_cache_locs to the longest sequence.", "00"),
    _e("top_k_tokens row {b} (seq_lens[{b2}] = {n}) misses positions {bad} that have no host backup (host_cache_locs = -1); a position can be loaded only after its device-to-host backup",
       "A position selected before its KV was backed up to the host: sglang would copy host row -1 "
       "(garbage).",
       "Select a position only after its backup (the newest token is served from column H).", "00"),
    _e("miss_src/miss_dst must have shape [batch, >= top_k] (capacity {k}).",
       "The single-step miss plan is not 2-D, has fewer rows than the batch or fewer than top_k "
       "columns (a long-path row can miss every lane): the kernel would write past it.",
       "Allocate miss_src [batch, top_k] int64 and miss_dst [batch, top_k] int32 (plus miss_count [batch] int32).",
       "13"),
    _e("miss_count must have shape [batch].",
       "miss_count is not 1-D or shorter than the batch.", "Allocate miss_count as [batch] int32.", "03"),
    _e("miss_src/miss_dst must have shape [>= num_real_reqs ({n}), max misses].",
       "The plan to replay has fewer rows than num_real_reqs says are real.",
       "Replay the plan that the swap-in recorded, with the same num_real_reqs.", "08"),
    _e("miss_count must have shape [>= num_real_reqs ({n})].",
       "miss_count has fewer entries than num_real_reqs.", "Replay the recorded plan unchanged.", "08"),
    _e("miss_count[{r}] = {count} is outside [0, {cols}] (the plan's columns)",
       "A stale or corrupted count: the replay would read past the plan row.",
       "Bound the replay with num_real_reqs (rows past it are stale) and record the plan in the same step.",
       "08"),
    _e("miss_src and miss_dst entries below miss_count must be >= 0 (a -1 row has no item)",
       "A plan entry inside the count holds -1: an unwritten or corrupted plan.",
       "Replay only plans that the swap-in recorded.", "08"),
    _e("miss_dst holds device rows {rows} more than once; two replayed copies into one row would race",
       "A plan whose destinations collide (not one the swap-in can record).",
       "Replay only plans that the swap-in recorded.", "00"),

    _e("the arena must be 1-D with >= {need} elements, got shape {shape}",
       "Lesson 13's helper that addresses a flat buffer the way sglang's kernels address a plan "
       "(one base, one row stride) was given a buffer too small for batch rows of that stride.",
       "Pass a 1-D arena of at least (batch - 1) * row_stride + num_top_k elements.", "13"),

    # ---------------------------------------------------------------- miss plans (sglang texts)
    _e("miss_src/miss_dst rows overlap: row stride {stride} elements is less than the {capacity} entries a row may hold (a flat or reshaped buffer); allocate [batch, capacity] rows",
       "The plan's rows are closer together than the entries a row can hold (e.g. a flat [batch * K] "
       "buffer viewed with a short stride): sglang writes entry m of row b at b * stride + m, so "
       "rows with many misses overwrite the next row's entries and the replay copies wrong items.",
       "Allocate 2-D [batch, capacity] plan arrays (alloc_miss_plan for the speculative call).",
       "07"),
    _e("miss_src, miss_dst, and miss_count must be provided together.",
       "Only part of the miss plan was passed; a plan is recorded into all three arrays or none.",
       "Pass all three (alloc_miss_plan) or none.", "06", SGLANG),
    _e("miss_src must be int64 and miss_dst must be int32.",
       "A plan dtype from an old API (int64 miss_dst) or an int32 miss_src; the kernel would "
       "reinterpret the bytes.",
       "miss_src int64, miss_dst int32 (alloc_miss_plan allocates them).", "05", SGLANG),
    _e("miss_count must be int32.",
       "miss_count of another dtype.", "Allocate miss_count as int32.", "05", SGLANG),
    _e("miss_src/miss_dst row strides must match.",
       "The kernel indexes both plan arrays with one row stride (in elements); e.g. miss_dst sliced "
       "from a wider buffer would put the pairs in different places.",
       "Allocate both with the same row pitch (alloc_miss_plan), or slice both the same way.",
       "07", SGLANG),
    _e("HiSparse speculative swap requires 2-4 steps, got {num_steps}.",
       "The speculative swap-in serves 2 to 4 draft steps per call.",
       "Use the single-step load_cache_to_device_buffer_mla for one step; split longer drafts.",
       "04", SGLANG),
    _e("speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] (capacity {plan_capacity}).",
       "The miss plan has fewer than steps * top_k columns, fewer rows than the batch (padding rows "
       "included) or is not 2-D. In the worst case every occurrence of every step is a distinct miss.",
       "Allocate the plan with alloc_miss_plan(batch, steps, top_k) (miss_plan_capacity columns) and "
       "slice rows to the padded batch.",
       "01", SGLANG),
    _e("speculative miss_count must have shape [batch].",
       "miss_count is not 1-D or shorter than the batch.", "Allocate with alloc_miss_plan.", "03", SGLANG),
    _e("speculative top_k_tokens must have shape [batch, steps, top_k], got shape {shape}",
       "A 2-D (single-step) selection passed to the speculative launcher.",
       "Stack the steps: [batch, steps, top_k] int32.", "04"),
    _e("speculative swap needs 0 < steps * top_k <= {max}, got {steps} * {top_k}",
       "More occurrences per request than the kernel's per-request tables hold.",
       "Lower top_k or the number of steps.", "04"),
    _e("state.scratch_state must be C-contiguous (its metadata rows are read as int64 words)",
       "A sliced speculative state.", "Allocate the state with make_hisparse_spec_state.", "01"),
    _e("top_k_device_locs must have shape [batch, steps, top_k] = [{batch}, {steps}, {top_k}], got shape {shape}",
       "The speculative output does not match top_k_tokens.", "Allocate it like top_k_tokens.", "04"),
    _e("{name} rows must be dense over (steps, top_k), got strides {strides} bytes",
       "A strided view of a [batch, steps, top_k] table.", "Pass contiguous [batch, steps, top_k] tables.", "01"),
    _e("device_buffer_locs must have the shape and row stride of device_buffer_tokens, got {a} / {b} and {c} / {d}",
       "The two slot tables differ in shape or row stride (both are indexed with one stride).",
       "Allocate both tables with the same shape.", "07"),
    _e("host_cache_locs must be row-contiguous [>= {n}, <= 2^31] int64, got shape {shape} strides {strides}",
       "A sliced or too-small position-to-host-row table.", "Pass a contiguous [requests, max_sequence] int64 table.", "01"),
    _e("req_pool_indices must have shape [batch] = [{batch}] int64 (contiguous), got {shape}",
       "req_pool_indices does not hold one int64 request row per batch row.",
       "Pass [batch] int64 (the speculative path reads int64).", "01"),
    _e("seq_lens must have shape [batch * steps] = [{n}] int32 (one length per step, contiguous), got shape {shape}",
       "One length per request instead of one per request and step.",
       "Pass [batch * steps] int32: the length seen by each draft step.", "04"),
    _e("make_hisparse_spec_state needs 0 < num_requests <= hot_buffer_size and hot_buffer_size >= 2, got num_requests={n}, hot_buffer_size={hot}",
       "The CLOCK control row keeps one column per request, so requests cannot outnumber hot slots.",
       "Use 0 < num_requests <= hot_buffer_size and hot_buffer_size >= 2.", "01"),
    _e("state must be a HiSparseSpecState, got {type_name}",
       "Something other than the state tuple was passed.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.scratch_locs must have shape [num_requests > 0, capacity > 0], got shape {shape}",
       "A hand-built or empty state.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.cache_index must have shape [num_requests, 2, hash_size], got shape {shape}",
       "A hand-built state.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.cache_index hash_size must be a power of two, got {hs}",
       "The hash is indexed with a mask.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.cache_index has {rows} request rows, fewer than scratch_locs ({n})",
       "State arrays of different request counts.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.cache_policy must have shape [num_requests + 1, hot_buffer_size] (one CLOCK control row and one reference-epoch row per request), got shape {shape} for {n} requests",
       "A hand-built state.", "Build it with make_hisparse_spec_state.", "01"),
    _e("hot_buffer_size (state.cache_policy width) must be in [2, {max}], got {hot}",
       "A hot buffer too small or too large for the speculative state.",
       "Use 2 <= hot_buffer_size <= the maximum in the message.", "01"),
    _e("state has {n} request slots but the CLOCK control row holds only hot_buffer_size={hot} columns",
       "More requests than hot slots.", "Use num_requests <= hot_buffer_size.", "01"),
    _e("state.scratch_state must have shape [num_requests + 1, >= {need}] (one counter row and one miss-metadata row per request), got shape {shape}",
       "A scratch state too small for steps * top_k occurrences.",
       "Allocate the state for the largest steps * top_k you launch (make_hisparse_spec_state).", "01"),
    _e("state.scratch_state row stride must be even (64-bit aligned metadata), got {n} elements",
       "A sliced scratch state.", "Build it with make_hisparse_spec_state.", "01"),
    _e("state.cache_index banks must be contiguous ([..., 2, hash_size] dense)",
       "A sliced cache index.", "Build it with make_hisparse_spec_state.", "01"),
    _e("device_buffer_tokens must have shape [>= {n}, >= {hot}], got shape {shape}",
       "The slot tables do not cover the state's requests and hot buffer.",
       "Allocate [num_requests, >= hot_buffer_size + 1] tables.", "01"),

    # ---------------------------------------------------------------- kv-canary plan
    _e("kv-canary: {fn} verify_capacity={verify_capacity} does not match verify_plan_out.verify_slot_indices.shape[0]={plan_verify_capacity}",
       "verify_capacity was computed separately from the size the VerifyPlan was allocated with.",
       "Derive both from one expression, or pass int(plan.verify_slot_indices.shape[0]).",
       "02", SGLANG),
    _e("kv-canary: {fn} requires full_to_swa_index_mapping when swa_window_size > 0",
       "An SWA window without the full-to-SWA slot table: verify entries would name full-pool "
       "slots where the SWA canary buffer is indexed by SWA slots.",
       "Pass window 0 for a FULL group (window = swa if the group is SWA else 0), or pass the "
       "group's LUT.",
       "12", SGLANG),
    _e("kv-canary: bs={bs} exceeds write_req_capacity={r}",
       "The WritePlan has fewer rows than the batch passed in (e.g. sized to the real batch while "
       "the plan input is capacity-sized). sglang's reference silently truncates here.",
       "Allocate WritePlan.allocate(write_req_capacity >= bs), with bs = the plan input's length.",
       "12", SGLANG),
    _e("kv-canary: {fn} supports at most bs={max} reqs per launch, got bs={bs}. Bump PLAN_BS_BLOCK_SIZE if real workloads need this.",
       "The one-block offsets kernel covers at most 4096 rows.",
       "Keep the plan input at most 4096 rows.", "12", SGLANG),
    _e("kv-canary: {fn} requires req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens is set",
       "An expected-token pool without per-row valid lengths: stale tails of recycled rows would "
       "raise false token mismatches.",
       "Pass req_to_verify_expected_tokens_valid_lens ([bs] int64).", "12", SGLANG),
    _e("kv-canary: {fn} swa_window_size must be >= 0, got {w}",
       "A negative window.", "Use 0 (FULL group) or the model's positive window.", "12"),
    _e("kv-canary: {fn} req_to_token must have at least one column, got {got}",
       "An empty request-to-token table.", "Pass ReqToTokenPool.req_to_token ([max_reqs, max_seq_len] int32).", "12"),
    _e("kv-canary: {fn} full_to_swa_index_mapping must not be empty",
       "An empty LUT.", "Size the LUT full_pool_size + 1.", "12"),
    _e("kv-canary: VerifyPlan verify_capacity must be positive, got {c}",
       "A zero capacity from an empty sweep or batch.", "Clamp with max(1, ...).", "02", SGLANG),
    _e("kv-canary: WritePlan write_req_capacity must be positive, got {r}",
       "A zero capacity.", "Clamp with max(1, ...).", "12", SGLANG),
    _e("kv-canary: {fn} {name} must have shape {want}, got {got}",
       "A per-row or plan array of the wrong length (per-row arrays need length bs).",
       "Use VerifyPlan.allocate / WritePlan.allocate and [bs] inputs.", "12", OURS),
    _e("kv-canary: {fn} {name} must be 2-D, got {got}",
       "A 1-D req_to_token or expected-token pool.", "Pass the [max_reqs, cols] table.", "12", OURS),
    _e("kv-canary: {name} must have dtype {dtype}, got {got}",
       "Request metadata of the wrong dtype (e.g. int32 req_pool_indices or an int64 req_to_token).",
       "req_pool_indices, prefix_lens, extend_seq_lens, LUT, plan arrays int64; req_to_token and "
       "the pool int32; counters as documented.", "12", SGLANG),
    _e("kv-canary: {name} must be {ndim}-D, got {got}",
       "A canary array with the wrong number of dimensions.", "Allocate with VerifyOrWriteContext.allocate.", "12", OURS),
    _e("kv-canary: {name} must have shape {shape}, got {got}",
       "A canary array of the wrong shape.", "Allocate with VerifyOrWriteContext.allocate / the plan allocators.", "12", OURS),
    _e("kv-canary: {name} must be contiguous",
       "A sliced or transposed tensor.", "Pass contiguous tensors.", "12", SGLANG),
    _e("kv-canary: at most {n} RealKvSource entries supported by the CUDA ABI, got {got}",
       "More than 4 real-KV sources.", "Merge or drop sources.", "12", SGLANG),
    _e("kv-canary: real_kv_sources[{i}] must be a RealKvSource, got {type_name}",
       "Something other than a RealKvSource in the sources tuple.", "Wrap each KV view in RealKvSource.", "12"),
    _e("kv-canary: real_kv_hash_mode must be 0 (NONE), 1 (PARTIAL) or 2 (ALL), got {mode}",
       "An unknown hash mode.", "Use RealKvHashMode.", "12"),
    _e("kv-canary: violation_ring must have shape [ring_capacity, {n}], got {got}",
       "A ring of the wrong row width.", "Allocate [ring_capacity, 8] int64.", "12"),
    _e("kv-canary: plan must be a VerifyPlan, got {type_name}",
       "verify was given the WritePlan (or something else).", "Pass the VerifyPlan filled by the plan launcher.", "12"),
    _e("kv-canary: plan must be a WritePlan, got {type_name}",
       "write was given the VerifyPlan (or something else).", "Pass the WritePlan filled by the plan launcher.", "12"),
    _e("kv-canary: expected input tensors are required when enable_write_input_assert=True",
       "The write input assert has nothing to compare with.",
       "Pass expected_input_tokens and expected_input_positions, or turn the assert off.", "12", SGLANG),
    _e("kv-canary: expected input tensors must be None when enable_write_input_assert=False",
       "Dummy expected tensors with the assert off.", "Pass None.", "12", SGLANG),
    _e("kv-canary: {name} must have the length of input_ids ({n}), got {m}",
       "positions or out_cache_loc (or an expected tensor) of another length than input_ids.",
       "Slice all per-token tensors to the same length.", "12"),
    # ------------------------------------------- kv-canary: types, scalars and device value checks
    _e("kv-canary: {name} must be an array (NumPy, CuPy or a host_cache_array), got {type_name}",
       "A Python list, None, a scalar or a string where the launcher needs an array.",
       "Pass a NumPy array in the simulator, a CuPy array on a GPU.", "12"),
    _e("kv-canary: {name} must be an integer, got {got}",
       "A float (even 16.0), inf, NaN, a string, None or a bool for an integer argument: it is "
       "validated, never coerced.", "Pass a Python or NumPy integer.", "12"),
    _e("kv-canary: {name} must be in [{low}, {high}], got {value}",
       "An integer argument outside the range the kernels support.", "Pass a value in the range.", "12"),
    _e("kv-canary: {name} must be True or False, got {got}",
       "A flag given as something other than True/False (or 0/1).", "Pass a bool.", "12"),
    _e('kv-canary: checks must be "full" or "shapes", got {got}',
       "An unknown checks mode.", "Use checks='full' (default) or checks='shapes' (values validated upstream).", "12"),
    _e("kv-canary: {name} shares memory with {other}; the call writes {name2}, so it must be a buffer of its own",
       "An array the launch writes overlaps another array of the call: the kernel would read what it "
       "writes elsewhere, or two outputs would race.", "Pass separate buffers (allocate plans and "
       "contexts with their allocate helpers).", "12"),
    _e("kv-canary: context must be a VerifyOrWriteContext, got {type_name}",
       "Something other than a VerifyOrWriteContext as context.", "Build it with VerifyOrWriteContext.allocate.", "12"),
    _e("kv-canary: real_kv_sources must be a tuple of RealKvSource, got {type_name}",
       "real_kv_sources is not a tuple or list.", "Pass a tuple of RealKvSource (or ()).", "12"),
    _e("kv-canary: RealKvSource.tensor must have at least one row, got shape {shape}",
       "An empty KV view covers no slot.", "Pass the layer's [rows, bytes] view.", "12"),
    _e("kv-canary: slot_stride_bytes must be a multiple of 8, got {n}",
       "A canary row that is not whole int64 fields.", "Use 32 (or a larger multiple of 8).", "12"),
    _e("kv-canary: real_kv_sources[{i}] covers {covered} slots ({rows} rows x page_size={p}), fewer than canary_buf's {n} slots",
       "A real-KV source shorter than the canary buffer: folding a high slot would read past the source.",
       "Pass the whole KV layer (rows x page_size >= num_slots), or a smaller canary buffer.", "12"),
    _e("kv-canary: {fn} verify_plan_out must be a VerifyPlan, got {type_name}",
       "The plans were swapped, or something else was passed.", "Pass VerifyPlan.allocate(...).", "12"),
    _e("kv-canary: {fn} write_plan_out must be a WritePlan, got {type_name}",
       "The plans were swapped, or something else was passed.", "Pass WritePlan.allocate(...).", "12"),
    _e("kv-canary: {fn} req_pool_indices[{r}]={rp} is not a row of req_to_token (0 < rp < {max_reqs}; 0 marks a padding row)",
       "A request index past the request-to-token table, or negative: the plan kernels would read "
       "out of bounds. sglang does not check it.", "Pass the requests' ReqToTokenPool rows; 0 for padding.", "12"),
    _e("kv-canary: {fn} prefix_lens[{r}]={v} exceeds req_to_token's max_seq_len={n} (request row {rp})",
       "A prefix longer than the request's table row: verify entries would read past it.",
       "Pass the cached lengths of this batch (<= max_seq_len).", "12"),
    _e("kv-canary: {fn} extend_seq_lens[{r}]={v} with prefix_lens[{r2}]={p} runs past req_to_token's max_seq_len={n}",
       "prefix + extend does not fit the request's table row.", "Pass this step's extend lengths.", "12"),
    _e("kv-canary: {fn} req_to_verify_expected_tokens has {rows} rows, but req_pool_indices[{r}]={rp} needs row {row}",
       "The expected-token pool has fewer rows than the requests in use: the plan would read past it.",
       "Allocate the pool with as many rows as req_to_token.", "12"),
    _e("kv-canary: plan.write_offsets[{r}]={a} and plan.write_offsets[{r2}]={b} must satisfy 0 <= start <= end <= {n} (the length of input_ids) for every row < write_num_valid_reqs",
       "A WritePlan whose row ranges run backwards or past the inputs (a hand-built or stale plan, "
       "or inputs shorter than the plan's total).", "Fill the WritePlan with the plan launcher and "
       "pass inputs covering write_offsets[bs] entries.", "13"),
    _e("kv-canary: out_cache_loc[{i}]={v} is past canary_buf's {n} slots",
       "A KV slot past the canary buffer: the write would land out of bounds.",
       "Size the canary buffer to the KV pool (num_slots > every slot).", "13"),
    _e("kv-canary: plan.write_seed_slot_indices[{r}]={v} is past canary_buf's {n} slots",
       "A seed slot past the canary buffer.", "Fill the WritePlan with the plan launcher; size the "
       "canary buffer to the KV pool.", "13"),
    _e("kv-canary: out_cache_loc writes slot {s} more than once in one launch (live slots must be distinct: two writers of one slot race)",
       "Two entries write one KV slot (a clamping SWA table, a broken allocator): on a GPU the "
       "canary row would be a race. sglang does not check it.", "Pass distinct slots (or -1 to skip).", "13"),
    _e("kv-canary: out_cache_loc writes slot {s}, which a row of plan.write_seed_slot_indices reads as its seed in the same launch (a race)",
       "A slot written in this launch is also the slot a row reads its chain seed from.",
       "A seed is the slot of position prefix_len - 1: do not rewrite it in the same step.", "13"),
    _e("kv-canary: plan.verify_slot_indices[{k}]={v} is outside canary_buf's slots [-{n}, {n2}) (a negative slot counts from the end)",
       "A verify slot past the canary buffer: verify would read out of bounds.",
       "Fill the VerifyPlan with the plan launcher; size the canary buffer to the KV pool.", "13"),
    _e("kv-canary: plan.verify_prev_slot_indices[{k}]={v} is past canary_buf's {n} slots",
       "A predecessor slot past the canary buffer.", "Fill the VerifyPlan with the plan launcher.", "13"),
    # speculative family: the device-side value checks (speculative/value_checks.py) and the state helpers
    _e("req_pool_indices[{b}] = {rid} is outside [0, {n}) (the state's request slots)",
       "A batch row names a request slot the speculative state does not have (or a negative one, "
       "which would wrap to the last row).",
       "Pass request slots in [0, state.scratch_locs.shape[0]).", "04"),
    _e("req_pool_indices names request slot {rid} in more than one real batch row; the indices of real rows must be distinct (a row owns its request's state)",
       "Two real rows would commit into the same request's CLOCK state, hash banks and scratch row "
       "at once: a race.", "Give each real batch row its own request slot.", "08"),
    _e("seq_lens[{i}] = {n} is outside [0, {width}] (host_cache_locs holds {width} positions per request)",
       "A per-step sequence length that is negative or longer than host_cache_locs' rows: a token "
       "below it would be looked up past the row.",
       "Build seq_lens as prefix + step + 1 per step, within host_cache_locs.shape[1].", "04"),
    _e("host_cache_locs[{rid}, {token}] = {loc} (selected by top_k_tokens[{b}, {s}, {k}]) is past the host pool: host_cache holds {items} items of item_size_bytes = {size}; {count} selected positions are",
       "A selected miss would be copied from past the end of the host KV pool.",
       "Keep host_cache_locs within the host pool (or -1 for a position not backed up).", "04"),
    _e("state.scratch_locs[{rid}, {u}] = {loc} must be a device location in [0, {items}) (items of device_buffer): assign every request in the batch its landing zone before a call",
       "A scratch entry the call would copy a miss into is -1 or past the device pool (a fresh "
       "make_hisparse_spec_state holds -1 until landing zones are assigned).",
       "Give each request its own scratch locations (make_hisparse_spec_state(..., scratch_locs=...)).",
       "01"),
    _e("device_buffer_locs[{rid}, {c}] = {loc} is past the device pool: device_buffer holds {items} items of item_size_bytes = {size} (-1 = no location)",
       "A hot-slot or tail location past the device KV pool.",
       "Keep device_buffer_locs within the device pool, -1 for an empty slot.", "04"),
    _e("device location {loc} is held more than once among device_buffer_locs and state.scratch_locs of the requests in this call; hot slots, tail columns and scratch entries must own distinct locations (copies into one would race)",
       "Two slots (or a slot and a scratch entry) share one physical row: a copy into one overwrites "
       "the other, and promotion swaps would duplicate it.",
       "Give every hot slot, tail column and scratch entry its own device row.", "08"),
    _e("state.scratch_state row 0: the work / union-hit counters of request {rid} are not 0, which every call leaves them at; the state is corrupted (initialize_hisparse_spec_state resets a request)",
       "The counters were not zeroed (e.g. scratch_state filled with -1 including row 0), or a "
       "call was aborted midway.", "initialize_hisparse_spec_state for that request.", "01"),
    _e("state.scratch_state row {row} holds {count} scratch-table entries tagged with the coming call's scratch epoch {sigma}; the state is corrupted (initialize_hisparse_spec_state resets a request)",
       "The metadata row already looks full for the next call's epoch: inserting would probe "
       "forever.", "initialize_hisparse_spec_state for that request.", "01"),
    _e("state.cache_policy row {row} holds reference epochs outside [0, 2^{bits}); the state is corrupted (initialize_hisparse_spec_state resets a request)",
       "A reference epoch wider than the packed CLOCK state's epoch field: ages would be wrong.",
       "initialize_hisparse_spec_state for that request.", "01"),
    _e("req_pool_indices[{i}] = {rid} is outside [0, {n}) (the state's request slots); {count} entries are",
       "initialize_hisparse_spec_state was asked to reset a request slot the state does not have.",
       "Pass request slots in [0, state.scratch_locs.shape[0]).", "04"),
    _e("req_pool_indices holds request slot {rid} more than once; the indices must be distinct (each block resets the request it names)",
       "Two blocks of the initialiser would reset the same request at once.",
       "Pass each request slot once.", "04"),
    _e("scratch_locs must hold integer device locations, got dtype {dtype}",
       "make_hisparse_spec_state got scratch locations of a non-integer dtype.",
       "Pass an integer array of device rows.", "01"),
    _e("scratch_capacity ({cap}) must equal scratch_locs' width ({width})",
       "make_hisparse_spec_state got both a capacity and scratch locations of another width.",
       "Pass one of them, or make them agree.", "01"),
    _e("{name} must be a device (CuPy) array, got {type}",
       "A host array (or a Python object) where the kernel needs device memory.",
       "Move it to the GPU with device.to_device (the host KV pool is device.host_cache_array).", "11"),
    _e("{name} shares memory with {other}; an array the call writes must not overlap another argument",
       "An output or state array aliases another argument: the kernel would read what it writes.",
       "Give each argument its own buffer.", "08"),
]


# sglang's other texts for the same mistakes, keyed by the start of the entry's pattern: the C++
# RuntimeChecks behind the Python wrappers, the MTP kernel's checks, the plan-only wrapper's.
VARIANTS: dict[str, tuple[str, ...]] = {
    "speculative miss_src/miss_dst must have shape": (
        "speculative miss_src must have shape [batch, >= steps * top_k].",
        "speculative miss_dst must have shape [batch, >= steps * top_k].",
    ),
    "speculative miss_count must have shape": ("miss_count must have shape ({batch_size},)",),
    "miss_src/miss_dst row strides must match.": (
        "speculative miss_src/miss_dst row strides differ.",
        "miss_src and miss_dst row strides must match",
    ),
    "HiSparse speculative swap requires 2-4 steps": (
        "HiSparse speculative swap requires 2-4 steps.",
        "HiSparse speculative swap requires at least one step.",
        "HiSparse MTP swap requires hot_buffer_size >= top_k >= 1024, 2-4 steps, and at most 8192 total occurrences.",
    ),
    "speculative swap needs 0 < steps * top_k": (
        "HiSparse speculative swap requires positive steps/top-k and steps * top-k <= 8192, got {num_steps} * {num_top_k}.",
        "HiSparse speculative swap supports at most 8192 occurrences.",
        "HiSparse speculative swap requires a positive top_k.",
    ),
    "speculative top_k_tokens must have shape [batch, steps, top_k]": (
        "speculative top_k_tokens must have shape [batch, steps, top_k].",
        "top_k_tokens must have shape [batch, steps, top_k].",
        "top_k_tokens step dimension mismatch.",
        "top_k_tokens top-k dimension mismatch.",
    ),
    "top_k_device_locs must have shape [batch, steps, top_k]": (
        "speculative output must have shape [batch, steps, top_k].",
        "top_k_device_locs must match top_k_tokens.",
    ),
    "seq_lens must have shape [batch * steps]": ("seq_lens must provide one length per request and MTP step.",),
    "device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1]": (
        "device_buffer_tokens must include an extra page.",
        "device_buffer_tokens does not cover the hot buffer",
    ),
    "state.scratch_locs must have shape": (
        "speculative scratch_locs must have shape [num_requests, capacity].",
        "speculative scratch_locs must have shape [num_requests, scratch_capacity].",
    ),
    "state.cache_index must have shape": ("speculative cache_index must have shape [num_requests, 2, hash_size].",),
    "state.cache_index hash_size must be a power of two": ("ring hash capacity must be a power of two.",),
    "state.cache_index has {rows} request rows": ("speculative cache_index request capacity is smaller than scratch_locs.",),
    "state.cache_policy must have shape": (
        "speculative cache_policy must contain one CLOCK control row and one reference-epoch row per request.",
    ),
    "state.scratch_state must have shape": (
        "speculative scratch_state must contain one counter row and one miss-metadata row per request.",
    ),
    "state.scratch_state row stride must be even": ("speculative scratch metadata stride must be 64-bit aligned.",),
    "hot_buffer_size (state.cache_policy width)": (
        "speculative hot buffer must contain at least two slots.",
        "speculative CLOCK cursor requires hot_buffer_size <= 32768.",
    ),
    "num_real_reqs must be an int32 array with shape [1]": ("num_real_reqs must be an int32 device tensor with shape [1]",),
}

# Errors that more than one lesson turns on. The undersized speculative miss plan (headline 1) is
# lesson 01's error; lesson 08 shows it again with CUDA-graph padding rows counted in the batch.
ALSO: dict[str, tuple[str, ...]] = {
    "speculative miss_src/miss_dst must have shape": ("08",),
}


def _attach(catalogue: list[Entry]) -> list[Entry]:
    out = []
    for entry in catalogue:
        variants = tuple(v for k, vs in VARIANTS.items() if entry.pattern.startswith(k) for v in vs)
        also = tuple(a for k, ls in ALSO.items() if entry.pattern.startswith(k) for a in ls)
        out.append(replace(entry, variants=variants, also=also))
    return out


CATALOGUE = _attach(CATALOGUE)

# ---------------------------------------------------------------------------- matching a paste

_EXCEPTION_LINE = re.compile(r"^\s*(?:E\s+)?(?:[\w.]+\.)?\w*(?:Error|Exception|Warning)\s*:", re.MULTILINE)
_PREFIX = re.compile(r"^(?:E\s+)?(?:(?:[\w.]+\.)?\w*(?:Error|Exception|Warning)|runtimecheck failed|"
                     r"runtime check failed|error)\s*:\s*", re.IGNORECASE)
_KV_CANARY = re.compile(r"^kv-canary\s*:\s*", re.IGNORECASE)
_TOKEN = re.compile(r"\{[a-z0-9_]+\}|\w+|[^\w\s]")


def _last_exception(text: str) -> str:
    """The message of the last exception in a pasted traceback (or the text itself)."""
    starts = [m.start() for m in _EXCEPTION_LINE.finditer(text)]
    if "\n" not in text.strip() or not starts:
        return text
    return text[starts[-1]:]


def _normalise(text: str, keep_kv_canary: bool) -> str:
    """One spelling for a message or a pattern: whitespace, quotes, prefixes, final punctuation."""
    text = text.replace("\u2026", "...").translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
    text = re.sub(r"\s+", " ", text).strip().strip("`'\"").strip()
    while True:
        stripped = _PREFIX.sub("", text, count=1)
        if not keep_kv_canary:
            stripped = _KV_CANARY.sub("", stripped, count=1)
        if stripped == text:
            break
        text = stripped
    text = re.sub(r"(?:\.\.\.|[\s.;:,!])+$", "", text)
    text = re.sub(r"\s*([^\w\s{}])\s*", r"\1", text)  # spacing around punctuation is not meaningful
    return text.lower()


def _text_regex(text: str, normalised: bool = True, keep_kv_canary: bool = True) -> re.Pattern:
    if normalised:
        text = _normalise(text, keep_kv_canary)
    parts = _PLACEHOLDER.split(text)
    if normalised:  # the space beside a value may be gone ("got(3,)int32"): the value takes it
        parts = [p.lstrip() if i else p for i, p in enumerate(parts)]
        parts = [p.rstrip() if i < len(parts) - 1 else p for i, p in enumerate(parts)]
    body = ".+?".join(re.escape(p) for p in parts)
    if normalised and not parts[0]:
        body = body[3:]  # a paste may leave out a leading name (a function, an argument)
    return re.compile(body, re.DOTALL)


_REGEX_CACHE: dict[tuple[str, bool], re.Pattern] = {}


def _regex(text: str, keep_kv_canary: bool) -> re.Pattern:
    key = (text, keep_kv_canary)
    if key not in _REGEX_CACHE:
        _REGEX_CACHE[key] = _text_regex(text, keep_kv_canary=keep_kv_canary)
    return _REGEX_CACHE[key]


def _piece_score(message_tokens: list[str], text: str) -> int:
    """Fixed tokens of ``text`` matched when the whole paste is a contiguous piece of it
    (placeholders take any one or more tokens; the paste may start and stop anywhere, and its
    last word may be cut short), or -1 when it is not."""
    pattern = ["*" if t.startswith("{") else t for t in _TOKEN.findall(_normalise(text, False))]
    last = len(message_tokens) - 1
    states = {(i, False): 0 for i in range(len(pattern))}  # (next pattern token, in a placeholder)
    for k, token in enumerate(message_tokens):
        moved: dict[tuple[int, bool], int] = {}

        def keep(state, score):
            if moved.get(state, -1) < score:
                moved[state] = score

        for (i, absorbing), score in states.items():
            if absorbing:
                keep((i, True), score)
            if i < len(pattern):
                if pattern[i] == "*":
                    keep((i + 1, True), score)
                elif pattern[i] == token:
                    keep((i + 1, False), score + 1)
                elif k == last and token.isalnum() and pattern[i].startswith(token):
                    keep((i + 1, False), score)
        states = moved
        if not states:
            return -1
    return max(states.values())


def _pieces(message: str) -> list[Entry]:
    """Entries of which ``message`` is a piece (a partial paste), best first."""
    tokens = _TOKEN.findall(_normalise(message, False))
    words = {t for t in tokens if t[0].isalnum() and not t.isdigit()}
    if len(words) < 2:
        return []
    scored = []
    for entry in CATALOGUE:
        best = -1
        for text in entry.texts():
            if len(words & set(_TOKEN.findall(_normalise(text, False)))) >= 2:
                best = max(best, _piece_score(tokens, text))
        if best >= 3 and best >= 0.6 * len(tokens):
            scored.append((best, entry.specificity(), entry))
    return [e for *_, e in sorted(scored, key=lambda s: (-s[0], -s[1]))]


def explain(message: str) -> list[Entry]:
    """Entries matching a pasted ``message``, the most specific first.

    Forgiving: whitespace and final punctuation are ignored, as are prefixes such as
    ``ValueError:``, ``RuntimeError:`` or ``kv-canary:``; a whole traceback is read from its last
    exception; sglang's variant texts count; and a piece of a message (``verify_capacity=3 does
    not match ...``) finds the entries it is a piece of."""
    message = _last_exception(message)
    ranked = []
    for strict in (True, False):
        text = _normalise(message, keep_kv_canary=strict)
        for entry in CATALOGUE:
            if entry not in ranked and any(_regex(t, strict).search(text) for t in entry.texts()):
                ranked.append(entry)
        if ranked:
            # exact (prefix kept) matches come first; within a pass, more fixed text wins
            break
    if ranked:
        return sorted(ranked, key=lambda e: -e.specificity())
    return _pieces(message)


def suggest(message: str, n: int = 3) -> list[Entry]:
    """The ``n`` entries whose texts read most like ``message`` (for when ``explain`` finds none)."""
    text = _normalise(_last_exception(message), False)

    def likeness(entry):
        return max(difflib.SequenceMatcher(None, text, _PLACEHOLDER.sub("", _normalise(t, False))).ratio()
                   for t in entry.texts())

    scored = sorted(((likeness(e), i) for i, e in enumerate(CATALOGUE)), reverse=True)
    return [CATALOGUE[i] for score, i in scored[:n] if score >= 0.3]


def explain_report(message: str) -> tuple[str, int]:
    """What ``hisparse-numba explain`` prints for ``message``, and its exit status."""
    matches = explain(message)
    if matches:
        return "\n\n".join(entry.render() for entry in matches), 0
    lines = ["No catalogue entry matches that message."]
    nearest = suggest(message)
    if nearest:
        lines.append("Nearest entries (did you mean one of these?):")
        lines += [f"  [{', '.join(e.lessons)}] {e.pattern}" for e in nearest]
    lines.append("`hisparse-numba lessons list --all` shows the whole catalogue.")
    return "\n".join(lines), 1


def entries_for_lesson(lesson_id: str) -> list[Entry]:
    """Entries whose main lesson is ``lesson_id`` (the error that lesson teaches comes first)."""
    return [e for e in CATALOGUE if e.lesson == lesson_id]
