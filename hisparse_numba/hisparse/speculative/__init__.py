"""Speculative (multi-step) HiSparse swap-in: ``load_cache_to_device_buffer_spec_mla``.

Speculative decoding produces ``steps`` top-k selections per request (one per draft/verify row,
each with its own sequence length). This launcher resolves all ``T = steps * top_k`` occurrences
of a request in one launch pair and writes one physical device location per occurrence into
``top_k_device_locs[batch, steps, top_k]``. State layout: ``state.py``. The behaviour it
reproduces: docs/speculative-swap-in.md. Lessons 01, 03, 04 and 08 use this launcher.

Files, in reading order: ``checks.py`` (arguments, ``check_speculative -> SpecCall``),
``value_checks.py`` (the values, in one device pass), ``reference.py`` (the NumPy oracle, one
function per stage), then the kernel versions from plain to tuned (``versions.py`` lists them):
``v1_plain.py`` (one block per request, the stages in order), ``v2_tiles.py`` (a request over many
tiles; the tile stages in ``tiles.py``, the commit's in ``finish.py`` and ``commit.py``, the
single-occurrence and single-miss steps in ``device_fns.py``, geometry and workspace in
``tiling.py``) and ``v3_tuned.py`` (a committer tile and copier tiles: ``copiers.py``); then
``launch.py`` (the public launcher). State: ``state.py`` and ``hash.py``.

Per occurrence ``occ = step * top_k + k`` of a real row (``b < num_real_reqs[0]``), in order:

1. token < 0 or token >= ``seq_lens[b * steps + step]``: output -1.
2. Active tail: if token >= seq_len - tail (tail = row width - H), the first tail column
   ``c in [H, H + tail)`` with ``device_buffer_tokens == token`` and a location >= 0 serves it.
   No host IO, no state change: this is how draft tokens that are not backed up are served.
3. Hot lookup: positional fast path (``token < H`` and slot ``token`` holds it), bank 0, bank 1,
   and a linear scan of the H slots once the request's hash is HASH_DEGRADED. A hit outputs the
   slot's location and stamps the slot's reference epoch with this call's epoch E; the number of
   distinct stamped slots is the union-hit count.
4. Miss: ``host_cache_locs[rid, token] < 0`` gives -1. Otherwise the token is a *unique miss*,
   deduplicated across all steps: every occurrence of it gets the same location.

Deterministic choices (sglang decides these by atomic races; here they are defined, and the
reference follows the same definitions, so kernel == reference on every output and state array):

* Unique-miss numbering: ``unique_idx`` = rank of the token's *first occurrence* among the first
  occurrences of all missed tokens, in occurrence order (a block scan per tile plus the counts of
  the earlier tiles, see Launch geometry).
* Scratch table: an *ordered* linear-probing set (Amble & Knuth): along a probe run, tokens are
  kept in decreasing order, and an insert displaces smaller tokens. Its final layout depends only
  on the set of tokens, not on the order the threads inserted them (lock-free with CAS,
  as in Shun & Blelloch's deterministic hash tables). Home position: ``Knuth(token) mod T``.
* Misses with ``unique_idx < capacity`` land in ``scratch_locs[rid, unique_idx]`` (copied once,
  by the tile that numbered it); the others are *direct-overflow* misses, resolved in commit.
* Victims (commit), for the misses that need a hot slot (docs/speculative-swap-in.md, "Victims"):
  in union mode miss ``u`` samples ``min(partition_size, 6)`` ring positions spread over its
  partition ``u, u + m, u + 2m, ... < H`` after the cursor (``m`` = unique misses,
  ``partition_size = (H - 1 - u) // m + 1``), skipping slots stamped E and taking the oldest
  ``(E - ref) mod 2^bits`` (first on ties). In approximate mode miss ``u`` walks
  ``approximate_candidate(linear, E, H)`` for ``linear = u, u + m, ... < H`` (``u - cap`` and
  ``m - cap`` for a direct-overflow miss) and claims the first slot not stamped E; misses that
  want the same slot settle it in rounds, the smallest ``unique_idx`` first. A miss left
  without a victim probes the ring in Knuth-hash order from ``cursor + u * 2654435761`` (mod 2^32,
  mod H) and takes the first slot not stamped E, in ``unique_idx`` order; union mode takes the
  misses 512 at a time (sample, then that chunk's fallbacks), as sglang's commit block does.
* Approximate-mode admission: last-step misses with ``unique_idx < capacity`` are claimed; the
  first ``budget`` of them in ``unique_idx`` order are admitted.
* Hash inserts: rounds in ordinal order (``state.py`` docstring).

Commit, per real request: ``union mode`` when ``misses + union_hits <= H`` (every scratch miss
with a location is promoted), else the *approximate mode* (if there is no overflow all reference
epochs are cleared to 0; last-step hits are re-stamped E; only admitted misses are promoted;
budget = H, or ``max(0, H - union_hits - overflow)`` with overflow). Promotion swaps locations: the
victim slot takes the scratch location (bytes already there) and the scratch entry takes the
victim's old location (zero copy). A direct-overflow miss takes its victim in place: the item is
copied from host into the victim's location, which all of its occurrences then output (-1 when no
victim was found). An application needs a victim whose location is >= 0. The victim's old token
is erased from the hash, the new one inserted. Finally the CLOCK cursor advances by
``min(misses, H)``, the epoch becomes E, the generation sigma, and the counters are reset.

Padded rows (``b >= num_real_reqs[0]``) output 0 everywhere and ``miss_count[b] = 0``; nothing else.

Miss plan (optional): ``miss_src[b, u], miss_dst[b, u]`` = host location and device location of
unique miss ``u`` for every miss that was copied (scratch location >= 0, or a resolved direct
overflow), ``(-1, -1)`` for the other unique misses; columns ``>= miss_count[b]`` are left
untouched. ``miss_count[b]`` = number of unique misses.

Checks: ``checks.py`` (shapes, dtypes, scalars, on the host) and ``value_checks.py`` (every value
the kernel indexes with, on the device in one pass; ``checks="shapes"`` skips it).

Launch geometry of version 3 (version 1 runs one block per request). sglang splits the work into
a launch pair (gather, then commit) because the commit needs a grid-wide barrier. Here one
launch does both, with a barrier per request instead, so that a request's commit and every tile's
host copies overlap:

* Grid ``(batch, tiles)`` x ``tile`` threads (``tile`` = 1024 on a GPU, 32 in the simulator so
  that small tests run several tiles). A tile takes its index ``y`` from a per-request ticket, so
  it only ever waits for tiles that started before it; thread ``i`` resolves occurrences
  ``(y * tile + i) * reps + r``, ``r < reps``.
* 1. Classify: outputs of non-misses, stamps (union counter), ordered scratch-table inserts, and a
  claim of every missed token in a private set whose positions never move (``claim_first`` keeps
  the token's smallest occurrence). With copier tiles, the thread that inserts a token lists its
  host location and claim position. Publish CLAIMED (with the number listed).
* 2. Once the earlier tiles have claimed, an occurrence is its token's first iff it is the claimed
  minimum. Count the tile's firsts (block scan), publish COUNTED, and add up the earlier tiles'
  counts (each earlier tile is waited for by its own thread): ``unique_idx = before + rank``.
* 3. Outputs of the first occurrences, plan entries and the copy destinations: this tile's copy
  list, or with copier tiles each token's destination by claim position (``claim_dst``); they are
  read now, before any commit can swap scratch locations. Publish NUMBERED.
* 4. A tile holding later occurrences of missed tokens waits for NUMBERED of the earlier tiles
  and gives them their first occurrence's location.
* 5. A tile arrives (threadfence, then a per-request arrival counter) with its NUMBERED, or after
  step 4 if it has one. The *finisher* commits the request in three stages, each once the tiles
  have reached a point: when every tile has COUNTED, the mode and, in union mode, the victims and
  their evictions from the hash (they need only the number of misses and the hits' stamps, and
  the tiles read the hash only while they classify); when every tile has NUMBERED, the index of
  the scratch table, in approximate mode admission, victims and evictions, then the misses'
  tokens into their slots and the hash inserts; when every tile has arrived, the workspace reset,
  promotion (the tiles read the scratch locations until they arrive), direct overflow and
  counters. When every block fits on the SMs at once (``committer_tile``: batch 1 and 8 at
  sglang's sizes), each request has one more tile, the committer, which takes the last ticket,
  resolves nothing and runs the stages on an SM of its own as soon as the tiles reach them, so
  the first overlaps the tiles' numbering. Otherwise the last tile to arrive finishes the request
  (every stage is reached by then), and copies its own list after that. Promotion runs in one
  pass with the misses' tokens entering their slots, once every tile has arrived.
* 6. Every tile copies its listed scratch misses from the host pool, unless the request has copier
  tiles (``copier_tiles``: at least one idle SM per tile beside a committer, batch 1 at sglang's
  sizes): they take the tickets between the tiles and the committer and wait until every tile has
  CLAIMED. Then each of their other warps reads one listed item (up to ``HOLD_WORDS`` words per
  lane) from the host into registers, while the first warp waits for NUMBERED, indexes an even
  share of the scratch table (the committer's index pass, which it then skips) and arrives. A
  warp then writes its item to the destination noted by claim position, and the copier tiles
  copy the items no warp held, so that the four tiles holding a step's misses do not copy them
  alone, and the copies start before the misses are numbered.

The private buffers (tickets, flags, claims, copy lists) are ``Workspace``.
"""

from .checks import COUNT_MESSAGE, SpecCall, check_speculative, plan_shape_message, steps_message
from .launch import (Workspace, clear_workspace, geometry, launch_unchecked,
                     load_cache_to_device_buffer_spec_mla, workspace)
from .versions import VERSIONS, Version, check_version
from .reference import (load_cache_to_device_buffer_spec_mla_reference, table_find_reference,
                        table_insert_reference, union_sample_positions)

__all__ = [
    "COUNT_MESSAGE",
    "SpecCall",
    "VERSIONS",
    "Version",
    "Workspace",
    "check_speculative",
    "check_version",
    "clear_workspace",
    "geometry",
    "launch_unchecked",
    "load_cache_to_device_buffer_spec_mla",
    "load_cache_to_device_buffer_spec_mla_reference",
    "plan_shape_message",
    "steps_message",
    "table_find_reference",
    "table_insert_reference",
    "union_sample_positions",
    "workspace",
]
