"""What the wide sweep found, one test per fix: the mutated call, rejected cleanly (a ValueError naming
the argument, every buffer byte-identical) or accepted and equal to the NumPy reference.

* written arrays whose elements share memory (a broadcast row, rows of an ``as_strided`` view that
  overlap) were accepted and raced: ``checks.check_no_overlap`` now rejects them;
* ``initialize_hisparse_spec_state`` accepted state arrays sharing memory with each other or with
  its inputs: it now checks them as the speculative launcher does;
* a kv-canary prefix far below 0 wrapped ``prefix - swa_window_size`` to a huge position (an
  out-of-bounds read): prefixes below -2^62 and windows above 2^62 are rejected;
* the write reference raised OverflowError where the kernel wraps ``position + 1``;
* the replay launched ``num_blocks`` blocks even when the plan needs far fewer (2^31 - 1 blocks
  ran the simulator out of memory): it launches what the plan can use, and at most CUDA's grid;
* rejections that named another argument than the one at fault now name both.
"""

import numpy as np
import pytest

from hisparse_numba.checks import overlaps_itself

from .harness import copy_call, default_to_device, judge_call, snapshot, changed, sample, Mutation
from .test_sweep import ENTRY_POINTS

ENTRIES = {e.name: e for e in ENTRY_POINTS}


def _mutation(entry, base, name):
    found = [m for m in entry.mutations(base) if m.name == name]
    assert len(found) == 1, f"{entry.name}: no mutation {name!r}"
    return found[0]


def rejection(entry_name: str, mutation_name: str) -> str:
    """The message of the mutated call's ValueError; every buffer of the call is unchanged."""
    entry = ENTRIES[entry_name]
    base = entry.build(np.random.default_rng(0))
    mutation = _mutation(entry, base, mutation_name)
    call = (entry.to_device or default_to_device)(copy_call(base))
    mutation.apply(call)
    snap = snapshot(call)
    with pytest.raises(ValueError) as info:
        entry.call(call)
    assert not changed(snap), "a rejected call changed a buffer"
    return str(info.value)


def outcome(entry_name: str, mutation_name: str) -> str:
    entry = ENTRIES[entry_name]
    base = entry.build(np.random.default_rng(0))
    kind, detail = judge_call(entry, copy_call(base), _mutation(entry, base, mutation_name))
    return kind + (f": {detail}" if detail else "")


SELF_OVERLAPPING = [
    ("load_cache_to_device_buffer_mla", "top_k_device_locs: row 0 broadcast over every row (stride 0)"),
    ("load_cache_to_device_buffer_mla", "top_k_device_locs: rows overlap (row stride of one element)"),
    ("load_cache_to_device_buffer_mla", "lru_slots: row 0 broadcast over every row (stride 0)"),
    ("load_cache_to_device_buffer_mla", "miss_count: row 0 broadcast over every row (stride 0)"),
    ("load_cache_to_device_buffer_spec_mla", "top_k_device_locs: row 0 broadcast over every row (stride 0)"),
    ("load_cache_to_device_buffer_spec_mla", "top_k_device_locs: rows overlap (row stride of one element)"),
    ("load_cache_to_device_buffer_spec_mla", "miss_count: row 0 broadcast over every row (stride 0)"),
    ("load_cache_to_device_buffer_spec_mla", "state.cache_index: rows overlap (row stride of one element)"),
    ("load_cache_to_device_buffer_spec_mla", "state.cache_policy: row 0 broadcast over every row (stride 0)"),
    ("initialize_hisparse_spec_state", "state.cache_index: row 0 broadcast over every row (stride 0)"),
]


@pytest.mark.parametrize("entry,mutation", SELF_OVERLAPPING, ids=[f"{e}/{m[:40]}" for e, m in SELF_OVERLAPPING])
def test_a_written_array_whose_elements_share_memory_is_rejected(entry, mutation):
    name = mutation.split(":")[0]
    message = rejection(entry, mutation)
    assert message.startswith(f"{name} overlaps itself"), message


@pytest.mark.parametrize("mutation", [
    "state.cache_policy: shares state.scratch_state's buffer",
    "state.scratch_state: overlaps the end of device_buffer_tokens",
    "state.cache_index: shares state.scratch_locs's buffer",
])
def test_the_initialiser_rejects_state_arrays_that_share_memory(mutation):
    message = rejection("initialize_hisparse_spec_state", mutation)
    assert "shares memory with" in message and mutation.split(":")[0] in message, message


def test_overlaps_itself_tells_shared_elements_from_other_layouts():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    assert overlaps_itself(np.broadcast_to(a[:1], a.shape))
    assert overlaps_itself(np.lib.stride_tricks.as_strided(a, (4, 6), (4, 4)))
    assert overlaps_itself(np.lib.stride_tricks.as_strided(a, (2, 6), (20, 4)))   # row 1 starts inside row 0
    for fine in (a, a[::-1], a[:, ::-1], a[:, :3], a.T, a[::2, ::3], a[:0], a[:1], np.zeros(1)[0:1]):
        assert not overlaps_itself(fine), fine.strides


def test_a_kv_canary_prefix_far_below_zero_is_rejected_not_wrapped():
    message = rejection("launch_canary_plan_kernels", "prefix_lens: element 0 = -9223372036854775808")
    assert "prefix_lens[0]=-9223372036854775808 is below -2^62" in message
    assert outcome("launch_canary_plan_kernels", "prefix_lens: element 0 = -1") == "ok-accepted"
    message = rejection("launch_canary_plan_kernels", "swa_window_size: int extreme 9223372036854775807")
    assert "swa_window_size must be in [0, 2^62]" in message
    assert outcome("launch_canary_plan_kernels", "swa_window_size: int extreme 2147483647") == "ok-accepted"


def test_the_write_reference_wraps_the_expected_position_as_the_kernel_does():
    assert outcome("launch_canary_write_kernel", "positions: element 0 = 9223372036854775807") == "ok-accepted"


def test_the_replay_launches_only_the_blocks_its_plan_can_use():
    from hisparse_numba.hisparse.single_step.planned_copy import blocks_used
    from hisparse_numba.hisparse.single_step.planned_copy_checks import check_planned_copy

    assert outcome("copy_cache_planned_mla", "num_blocks: int extreme 2147483647") == "ok-accepted"
    assert "num_blocks must be <= 2147483647" in rejection("copy_cache_planned_mla",
                                                          "num_blocks: int extreme 2147483648")
    base = ENTRIES["copy_cache_planned_mla"].build(np.random.default_rng(0))
    call = check_planned_copy(**{**default_to_device(base), "num_blocks": 2**31 - 1}, checks="shapes")
    rows, columns = base["miss_src"].shape
    assert blocks_used(call) == -(-rows * columns * 32 // base["block_size"])
    assert blocks_used(call._replace(num_blocks=2)) == 2


@pytest.mark.parametrize("entry,mutation,named", [
    ("load_cache_to_device_buffer_mla", "seq_lens: element 0 = 1", "seq_lens[0] = 1"),
    ("load_cache_to_device_buffer_mla", "seq_lens: element 0 = 17", "seq_lens[0] = 17"),
    ("copy_cache_planned_mla", "num_real_reqs: element 0 = 3", "num_real_reqs[0] = 3"),
    ("copy_cache_planned_mla", "item_size_bytes: int extreme 2147483648", "item_size_bytes = 2147483648"),
    ("launch_canary_verify_kernel", "plan.verify_num_valid: element 0 = 2147483647",
     "plan.verify_num_valid[0]=2147483647"),
])
def test_a_rejection_names_the_argument_that_was_changed(entry, mutation, named):
    assert named in rejection(entry, mutation)


def test_the_default_run_is_a_seeded_sample_of_every_group():
    mutations = [Mutation(f"{g} {i}", "x", lambda c: None, group=g)
                 for g, n in (("core", 300), ("alias", 100), ("value", 60), ("layout", 5)) for i in range(n)]
    picked = sample(mutations, 100, seed=0)
    assert picked == sample(mutations, 100, seed=0)
    groups = {m.group for m in picked}
    assert groups == {"core", "alias", "value", "layout"}
    assert 95 <= len(picked) <= 110
    assert sum(m.group == "layout" for m in picked) == 5
    assert sample(mutations, None) == mutations and sample(mutations[:50], 100) == mutations[:50]
