"""Write tl_kernel.py beside this file (or in $TL_OUT): the working tree's speculative kernel.py (or
$TL_SRC) with
globaltimer stamps (stamps.py) at the committer's stages, the copier tiles' and the tiles'; and
tl_bare.py, the same kernel with only the first entry and the last exit stamped (tl_graph.py). Each
anchor is a line of kernel.py and must be found exactly once: update them when the kernel changes."""
import os, re, pathlib
root = pathlib.Path(__file__).resolve().parents[2]
src = pathlib.Path(os.environ.get("TL_SRC", root / "hisparse_numba/hisparse/speculative/kernel.py")).read_text()
s = src
s = s.replace("from ...", "from hisparse_numba.").replace("from ..", "from hisparse_numba.hisparse.")
s = s.replace("from .commit", "from hisparse_numba.hisparse.speculative.commit")
s = s.replace("from .device_fns", "from hisparse_numba.hisparse.speculative.device_fns")
s = s.replace("import numpy as np\n", "import numpy as np\nfrom stamps import stamp_dev, stamp_max_dev, stamp_min_dev\n", 1)
bare = s

def after(anchor, code, ind=None, count=1):
    global s
    n = s.count(anchor)
    assert n == count, (n, anchor)
    if ind is None:
        ind = re.match(r"\s*", anchor.split("\n")[-1] if not anchor.endswith("\n") else anchor.split("\n")[-2]).group(0)
    else:
        ind = " " * ind
    lines = "".join(ind + l + "\n" for l in code.split("\n") if l)
    if anchor.endswith("\n"):
        s = s.replace(anchor, anchor + lines, 1)
    else:
        s = s.replace(anchor, anchor + "\n" + lines.rstrip("\n"), 1)

def sub(old, new, count=1):
    global s
    assert s.count(old) == count, (s.count(old), old)
    s = s.replace(old, new)

# finish_request: host_cache_locs -> stamps (bench never overflows or goes approximate)
a = s.index("    def finish_request_dev(")
e = s.index("    @cuda.jit(device=True, inline=True)\n    def arrive_dev(")
s = s[:a] + s[a:e].replace("host_cache_locs", "stamps") + s[e:]
Y = "cuda.gridDim.y - 1"
ST = lambda k: f"cuda.syncthreads()\nif tid == 0:\n    stamp_dev(stamps, {Y}, {k})"
after("        _, num_misses = block_exclusive_scan_dev(scan, share, tid, tile)\n", ST(1), 8)
after("""                                                          num_misses, cap, True, compact,
                                                          known_loc, scan, tid, tile)
""", ST(2), 12)
after("""                              compact, cursor, hot, e_now, emask, victims, aux, flag, u0, u1, base,
                              known_loc, tid)
""", ST(3), 12)
after("""                              scratch_locs, victims, rid, row, cap, True, compact, u0, u1, base,
                              known_loc, tid)
""", ST(4), 12)
after("""        wait_for_arrivals_dev(counters, b, tiles + copiers, tid)
""", "if tid == 0:\n    stamp_dev(stamps, %s, 5)" % Y, 8)
after("""                                   victims, i, u, rid, row, index, compact, cap, sigma)
                i += 1
        cuda.syncthreads()
""", "if tid == 0:\n    stamp_dev(stamps, %s, 7)" % Y, 8)
after("""                        scan, cells, tid, tile, True)
""", "if tid == 0:\n    stamp_dev(stamps, %s, 8)" % Y, 8)
after("""            if record:
                miss_count[b] = num_misses
""", "stamp_dev(stamps, %s, 9)" % Y, 12)
# kernel signature and calls
sub("copy_src, copy_dst, words_per_item, tail, n, gate):", "copy_src, copy_dst, words_per_item, tail, n, gate, stamps):")
sub("""            finish_request_dev(top_k_tokens, device_buffer_tokens, host_cache_locs,""",
    """            finish_request_dev(top_k_tokens, device_buffer_tokens, stamps,""")
# copier
sub("""copier, copiers, words_per_item, tid, tile, lists):""",
    """copier, copiers, words_per_item, tid, tile, lists, stamps):""")
call = s.index("            copy_share_dev(")          # the call (the def is indented less)
end = s.index("tid, tile, scan)", call)
s = s[:end] + "tid, tile, scan, stamps)" + s[end + len("tid, tile, scan)"):]
YC = "tiles + copier"
after("""        num_misses = 0
        for j in range(tiles):
            num_misses += lists[j]
""", f"if tid == 0:\n    stamp_dev(stamps, {YC}, 1)", 8)
# NUMBERED seen (2) and the copier tile's arrival (3): after its indexing share (main up to
# session 21), or at once (last-tile-index.patch)
if "cuda.atomic.exch(lists, tiles + 2, 1)" in s:
    after("""            if lane == 0:
                cuda.atomic.exch(lists, tiles + 2, 1)
""", f"if lane == 0:\n    stamp_dev(stamps, {YC}, 2)", 12)
    after("""            if cuda.atomic.add(lists, tiles, 1) == LANES - 1:
                cuda.atomic.add(counters, (b, 1), 1)
""", f"stamp_dev(stamps, {YC}, 3)", 12)
else:
    after("""                cuda.atomic.add(counters, (b, 1), 1)     # done with the flags
""", f"stamp_dev(stamps, {YC}, 2)\nstamp_dev(stamps, {YC}, 3)", 16)
after("""                    if w < words_per_item:
                        dev_words[dst + w] = held[h]
""", f"if lane == 0:\n    stamp_max_dev(stamps, {YC}, 4)", 16)
sub("""            g += loaders * copiers
""", f"""            g += loaders * copiers
        if lane == 0:
            stamp_max_dev(stamps, {YC}, 5)
""")
# tiles
after("""        y = shared[0]
""", "if tid == 0:\n    stamp_dev(stamps, y, 0)", 8)
after("""            if tid == 0 and shared[1] > 0:
                cuda.atomic.add(scratch_state, (0, COUNT_UNION * n + rid), shared[1])
""", "if tid == 0:\n    stamp_dev(stamps, y, 1)", 12)
after("""            wait_for_tiles_dev(flags, b, CLAIMED, y, tid, tile)
""", "if tid == 0:\n    stamp_dev(stamps, y, 2)", 12)
after("""            base = shared[2]
""", "if tid == 0:\n    stamp_dev(stamps, y, 3)", 12)
after("""            publish_dev(flags, b, NUMBERED, y, 1, tid)
""", "if tid == 0:\n    stamp_dev(stamps, y, 4)", 12)
after("""                if tid == 0:
                    cuda.threadfence()
                    shared[3] = arrive_dev(counters, b, tiles)
        cuda.syncthreads()
""", "if tid == 0:\n    stamp_dev(stamps, y, 5)", 8)
sub("""        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)
""", """        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)
        cuda.syncthreads()
        if tid == 0 and not is_committer:
            stamp_dev(stamps, y, 6)
""")
outdir = pathlib.Path(os.environ.get("TL_OUT", pathlib.Path(__file__).parent))
out = outdir / "tl_kernel.py"
out.write_text(s)
print("wrote", out)

# tl_bare.py (tl_graph.py runs it): the kernel with two stamps a call and no other change but one
# barrier at each exit: stamps[0, 0] the first block's entry (before anything is read), stamps[0, 1]
# the last block's exit. tl_graph.py gives each call of a captured graph its own row.
s = bare
def bare_sub(old, new):
    global s
    assert s.count(old) == 1, (s.count(old), old)
    s = s.replace(old, new)
bare_sub("copy_src, copy_dst, words_per_item, tail, n, gate):",
         """copy_src, copy_dst, words_per_item, tail, n, gate, stamps):
        if cuda.threadIdx.x == 0:
            stamp_min_dev(stamps, 0, 0)""")
bare_sub("""tid, tile, scan)
            return""", """tid, tile, scan)
            cuda.syncthreads()
            if tid == 0:
                stamp_max_dev(stamps, 0, 1)
            return""")
bare_sub("""        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)
""", """        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)
        cuda.syncthreads()
        if tid == 0:
            stamp_max_dev(stamps, 0, 1)
""")
out = outdir / "tl_bare.py"
out.write_text(s)
print("wrote", out)
