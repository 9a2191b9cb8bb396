"""%globaltimer stamps for the timeline copy of the speculative kernel (developer tooling; a real GPU
only: the simulator has no inline PTX)."""
from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic
from hisparse_numba.device import cuda


@intrinsic
def globaltimer(typingctx):
    sig = types.int64()

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        asm = ir.InlineAsm(fnty, "mov.u64 $0, %globaltimer;", "=l", side_effect=True)
        return builder.call(asm, [])
    return sig, codegen


@cuda.jit(device=True, inline=True)
def stamp_dev(stamps, y, slot):
    stamps[y, slot] = globaltimer()


@cuda.jit(device=True, inline=True)
def stamp_max_dev(stamps, y, slot):
    cuda.atomic.max(stamps, (y, slot), globaltimer())


@cuda.jit(device=True, inline=True)
def stamp_min_dev(stamps, y, slot):
    cuda.atomic.min(stamps, (y, slot), globaltimer())
