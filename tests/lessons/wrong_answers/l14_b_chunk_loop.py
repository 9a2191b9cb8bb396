"""Wrong answers to 14-b, the 16-byte chunk loop."""

from hisparse_numba.device import cuda

from . import wrong

PUZZLE = "14-b"


@cuda.jit(device=True, inline=True)
def two_rounds_of_four_lanes(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    for c in range(2):                       # the example's 5 chunks over 4 lanes, hard-coded
        w = 2 * (lane + 4 * c)
        if w < words_per_item:
            dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
            dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]


@cuda.jit(device=True, inline=True)
def by_word(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = lane                                 # 8-byte words, not 16-byte chunks: bytes right, chunks split
    while w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        w += num_lanes


@cuda.jit(device=True, inline=True)
def step_one_chunk(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane                             # every lane walks on to the end: chunks copied several times
    while w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]
        w += 2


@cuda.jit(device=True, inline=True)
def one_round(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane                             # one chunk per lane: the fifth chunk never moves
    if w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]


@cuda.jit(device=True, inline=True)
def loop_one_word_too_far(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane
    while w <= words_per_item:               # <=: a lane starts a chunk past the item's end
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]
        w += 2 * num_lanes


@cuda.jit(device=True, inline=True)
def forgets_the_item_offset(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane
    while w < words_per_item:
        dst_words[dst_loc + w] = src_words[src_loc + w]          # loc is an item, not a word
        dst_words[dst_loc + w + 1] = src_words[src_loc + w + 1]
        w += 2 * num_lanes


TWO_ROUNDS_OF_FOUR_LANES = wrong(two_rounds_of_four_lanes, 'case "many chunks per lane"', "no thread wrote")
BY_WORD = wrong(by_word, "both words", simulator_only=True)
STEP_ONE_CHUNK = wrong(step_one_chunk, "written by threads", simulator_only=True)
ONE_ROUND = wrong(one_round, "no thread wrote word", "chunk 4")
LOOP_ONE_WORD_TOO_FAR = wrong(loop_one_word_too_far, "the lesson's example")
FORGETS_THE_ITEM_OFFSET = wrong(forgets_the_item_offset, "the lesson's example")
