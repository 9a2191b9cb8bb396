"""Catalogue entries, first part: the swap-in kernels' sizes and arguments, the generic argument
checks, item copies (the 16-byte rule), host memory and the backend choice, and the gather and
swap-in data checks. ``plan_entries`` holds the rest; ``catalogue`` joins them in this order."""

from __future__ import annotations

from .entry import NUMBA, SGLANG, Entry
from .entry import entry as _e

ENTRIES: list[Entry] = [
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
    _e("num_blocks must be <= {limit} (CUDA's largest grid), got {num_blocks}",
       "More blocks than a CUDA grid can have: the launch would fail inside the driver.",
       "Use a few blocks (sglang's coordinator uses 4); the replay launches no more blocks than the "
       "plan's entries can use anyway.", "09"),
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
    _e("{name} must hold plain data (a numeric dtype: its bytes are copied), got dtype {dtype}",
       "A pool of Python objects (dtype object): it holds references, not the items' bytes, and "
       "no kernel can read it.", "Pass a pool of a numeric dtype (uint8 bytes, or the KV dtype).",
       "10"),
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
    _e("{name} overlaps itself (shape {shape}, strides {strides} bytes): the call writes it, so its elements must not share memory (a broadcast or an as_strided view with overlapping rows); pass an array of its own",
       "An output or state array whose elements share memory: a zero stride (broadcast_to, "
       "expand) or rows of an as_strided view that overlap. Two threads writing different "
       "elements would write the same bytes: a race, and a result that differs from the "
       "reference's.", "Allocate the output (or state) array whole, or pass a contiguous copy.",
       "07"),
    _e("{name} shares memory with {other}; the call writes {name2}, so it must be a buffer of its own",
       "An output passed as (or overlapping) another argument: the kernel would read what it "
       "has just written.", "Give every output its own buffer.", "00"),
    _e("{pool} holds {n} bytes, but {entry} = {value} needs item {item} of item_size_bytes = {size}",
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
    _e("top_k_tokens row {b} (fast path, seq_lens[{b2}] = {n}) selects positions {bad} >= seq_len; the fast path reads device_buffer_locs[rid, position] unchecked",
       "On the fast path (seq_len <= H) position p lives in slot p; a position past the sequence "
       "reads a slot that holds no token of this request.",
       "Select only positions < seq_len (or -1 for an empty lane).", "00"),
    _e("top_k_tokens row {b} (long path, seq_lens[{b2}] = {n} > hot_buffer_size {h}) holds positions {bad} outside [0, seq_len): every lane of a long-path row must be a valid position",
       "A -1 or out-of-range lane on the long path. sglang counts such a lane as a miss without "
       "assigning it: phantom copies into unassigned slots and stale outputs "
       "(docs/single-step-swap-in.md#what-sglang-leaves-unchecked).",
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
    _e("miss_count[{r}] = {count} is outside [0, {cols}] (the plan's columns; rows below num_real_reqs[0] = {n} are replayed)",
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
    _e("orders: a count >= 1, or names among 'forward', 'reverse' and 'shuffle:N' (N a seed), got {spec}",
       "The race check (racecheck.run, built on lesson 00's thread recorder) runs a launch once per thread order it is "
       "given; it got no order, or one it does not know.",
       "Pass orders=1 (forward), 3 (forward, reverse, shuffle:0) or a list such as ['reverse', 'shuffle:4'].",
       "00"),
    _e("names: two array arguments are both called {name}",
       "The thread recorder (threadviz.record, racecheck.run) reports every access by array name, and "
       "two array arguments were given the same one.",
       "Give each array argument its own name, in argument order.", "00"),

    # ---------------------------------------------------------------- lesson tools (09, syllabus)
    _e("overfull_step takes one request whose selected positions are all misses",
       "Lesson 09 builds what the swap-in would do with more misses than hot slots from explicit "
       "data, and that construction only covers one request whose every selected position misses.",
       "Pass the lesson's problem as it builds it (one request, no selected position hot).", "09"),
    _e("leftover_slots must be {n} slot numbers in [0, {h}), got {leftover}",
       "The misses past the H-th need a slot each, and lesson 09 says which slots they land in.",
       "Give one slot number per extra miss, each a real hot slot.", "09"),
    _e("no block {number} in the syllabus (blocks: {blocks})",
       "`hisparse-numba lessons slides` makes one deck per block of docs/syllabus.md, and no block "
       "has that number.",
       "Pass block numbers from docs/syllabus.md, or none for every block.", "00"),
    _e("{path}: no '## Block N · name' section with lesson rows",
       "The syllabus page lost its block sections, which the slides, the consistency tests and "
       "the lessons' order read.",
       "Restore docs/syllabus.md's '## Block N · name' headings and their lesson tables.", "00"),

    # ---------------------------------------------------------------- zero-install routes (workshops)
    _e("{repo} is not a GitHub repository: give OWNER/NAME or https://github.com/OWNER/NAME",
       "The Colab cells, badges, Binder links and hub values name the repository the lessons come "
       "from, and --repo was given something that is not one.",
       "Pass --repo OWNER/NAME (or the repository's https://github.com/OWNER/NAME address).", "00"),
    _e("source {source}: a URL or a path without quotes or backslashes",
       "The Colab setup cell writes the source into Python code as a quoted string.",
       "Pass a plain wheel URL, a wheel's path or a git+https URL.", "00"),
    _e("--image {image}: a lower-case image name without a tag, e.g. registry.example.org/class/hisparse-numba-singleuser (the tags are :cpu and :gpu)",
       "hub-values renames the hub's images; a tag or an upper-case letter would not be an image "
       "name Kubernetes can pull.",
       "Pass the image's registry path without a tag.", "00"),
    _e("the hub values do not name {default} (the images of the pyproject repository)",
       "hub-values renames the images deploy/hub/values.yaml names, and that file no longer names "
       "the default ones.",
       "Start from the shipped deploy/hub/values.yaml, or edit the image names by hand.", "00"),

    # ---------------------------------------------------------------- how kernels are built (the environment)
    _e("HISPARSE_NUMBA_INLINE must be 'nvvm' or 'numba', got {mode}",
       "HISPARSE_NUMBA_INLINE chooses who inlines the package's device functions: NVVM (the default) "
       "or Numba in its own IR, and was set to something else.",
       "Unset it, or set it to numba or nvvm.", "00"),
    _e("HISPARSE_NUMBA_VERSION must be 'tuned' or one of {versions}, got {text}",
       "HISPARSE_NUMBA_VERSION picks the rung of every kernel ladder that a launcher runs for "
       "version=None, and this family has no such rung.",
       "Unset it (the tuned rungs), or set it to tuned or to a rung every family has (1).", "16"),

    # ---------------------------------------------------------------- the kernel ladder (lesson 16)
    _e("version {number} needs {need} bytes of static shared memory at num_top_k={k}, hot_buffer_size={h}, block_size={bs}; the limit is {limit} (48 KiB): use a smaller size or version {default}",
       "The rung of the kernel ladder you chose keeps arrays in shared memory whose size grows with "
       "these sizes (version 1 of the single-step swap-in: 3 bytes per hot slot and 13 per lane). "
       "A block's static shared arrays may not pass 48 KiB: on a GPU the compiler refuses the kernel "
       "(ptxas: \"uses too much shared data\"); the simulator has no such limit, so the launcher "
       "checks it in both worlds.",
       "Use the tuned rung (version=None), whose shared memory does not grow with the hot buffer, "
       "or smaller sizes for the plain one.", "16"),
    _e("version must be an int or None, got {type}",
       "A kernel-ladder rung is chosen by its number (a bool, float or string is not one).",
       "Pass one of the numbers in the family's versions.VERSIONS, or None for the tuned rung.", "16"),
    _e("version must be one of {versions}, got {version}",
       "No rung of the kernel ladder has that number.",
       "Pass one of the numbers the message lists, or None for the tuned rung.", "16"),
]
