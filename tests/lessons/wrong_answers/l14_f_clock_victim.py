"""Wrong answers to 14-f, the CLOCK victim pick."""

from hisparse_numba.device import cuda
from hisparse_numba.lessons.ex14 import sample_position_dev

from . import wrong

PUZZLE = "14-f"


def make_pick(*, skip_stamped=True, wrap_ages=True, first_on_tie=True, oldest=True, miss_loop=True,
              stop_after_samples=True, serial=False):
    @cuda.jit
    def pick_victims(ref, cursor, e_now, miss_count, ebits, victims):
        r = cuda.blockIdx.x
        hot = ref.shape[1]
        mask = (1 << ebits) - 1
        i = cuda.threadIdx.x
        step = cuda.blockDim.x
        if serial:
            step = 1
            if i > 0:
                return
        while i < miss_count[r]:
            best = -1
            best_age = -1 if oldest else 1 << 30
            for sample in range(6):
                position = sample_position_dev(i, sample, miss_count[r], hot)
                if position < 0 and stop_after_samples:
                    break
                slot = (cursor[r] + position) % hot
                if ref[r, slot] != e_now[r] or not skip_stamped:
                    age = e_now[r] - ref[r, slot]
                    if wrap_ages:
                        age &= mask
                    better = age > best_age if oldest else age < best_age
                    if not first_on_tie:
                        better = better or age == best_age
                    if better:
                        best = slot
                        best_age = age
            victims[r, i] = best
            if not miss_loop:
                break
            i += step
    return pick_victims


TAKES_STAMPED_SLOTS = wrong(make_pick(skip_stamped=False), 'case "every sample stamped"')
AGES_WITHOUT_WRAP = wrong(make_pick(wrap_ages=False), 'case "epochs wrapped"')
LAST_ON_A_TIE = wrong(make_pick(first_on_tie=False), "victims[0, ")
YOUNGEST = wrong(make_pick(oldest=False), "the lesson's example")
ONE_MISS_PER_THREAD = wrong(make_pick(miss_loop=False), 'case "more misses than threads"', "no thread wrote")
PAST_THE_LAST_SAMPLE = wrong(make_pick(stop_after_samples=False), "case")
SERIAL_IN_THREAD_ZERO = wrong(make_pick(serial=True), "serial", simulator_only=True)
