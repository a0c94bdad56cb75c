//! The int4 kernel with AVX2, for x86-64 CPUs that have it (found at run time).
//!
//! The portable kernel (`dot_coarse`) widens every nibble to 16 bits before it multiplies:
//! about two products an instruction, so the int4 scan was bound by arithmetic, not by memory
//! (at 100,000 rows it ran twice as fast on two threads as on one). `vpmaddubsw` multiplies 32
//! unsigned bytes by 32 signed bytes and adds neighbouring pairs in one instruction: a block of
//! 64 numbers (32 packed bytes) is one load, a mask and a shift for its two nibble vectors, two
//! multiplies, and a `vpmaddwd` by ones to widen the pairs' sums — about seven products an
//! instruction. The sums are the same integers as the portable kernel's (no lane can overflow:
//! a 16-bit lane holds at most 2 × 2 × 15 × 127 = 7,620), so either kernel gives the same
//! intervals, bit for bit.
//!
//! The CPU's features are checked through `pulp`'s tokens, whose intrinsics are safe to call
//! once a token exists.

use std::arch::x86_64::__m256i;

use pulp::{NullaryFnOnce, cast, x86::V3};

/// One block of the query as this kernel reads it: its 64 numbers as `i8`, `[low, high]` in
/// the order of the packed row's nibbles — `low` holds numbers 0–15 and 32–47 of the block (the
/// low nibbles of its bytes 0–15 and 16–31), `high` numbers 16–31 and 48–63.
pub(super) type QueryBlock = [[i8; 32]; 2];

/// The query `q` (numbers within ±127, whole blocks of 64) rearranged into [`QueryBlock`]s.
pub(super) fn query_blocks(q: &[i16]) -> Vec<QueryBlock> {
    let narrow = |v: i16| v.clamp(-127, 127) as i8;
    q.as_chunks::<64>()
        .0
        .iter()
        .map(|block| {
            let mut low = [0i8; 32];
            let mut high = [0i8; 32];
            for j in 0..16 {
                low[j] = narrow(block[j]);
                low[16 + j] = narrow(block[32 + j]);
                high[j] = narrow(block[16 + j]);
                high[16 + j] = narrow(block[48 + j]);
            }
            [low, high]
        })
        .collect()
}

/// Writes into `out` the integer dot product of each int4 row in `rows` (packed as
/// `quantize_coarse_row` packs them, `query.len()` blocks each, nibbles still biased) with the
/// query, or returns `false`, writing nothing, when the CPU lacks AVX2.
pub(super) fn dots(rows: &[u8], query: &[QueryBlock], out: &mut [i32]) -> bool {
    let Some(simd) = V3::try_new() else {
        return false;
    };
    simd.vectorize(Dots {
        simd,
        rows,
        query,
        out,
    });
    true
}

/// [`dots`]' loop, run with the CPU's AVX2 enabled (`V3::vectorize`).
struct Dots<'a> {
    simd: V3,
    rows: &'a [u8],
    query: &'a [QueryBlock],
    out: &'a mut [i32],
}

impl NullaryFnOnce for Dots<'_> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        let avx = self.simd.avx2;
        let row_bytes = self.query.len() * 32;
        if row_bytes == 0 {
            return;
        }
        let nibble: __m256i = cast([0x0Fu8; 32]);
        let ones: __m256i = cast([1i16; 16]);
        for (row, slot) in self.rows.chunks_exact(row_bytes).zip(self.out) {
            let mut sums: __m256i = cast([0i32; 8]);
            for (bytes, [low, high]) in row.as_chunks::<32>().0.iter().zip(self.query) {
                let packed: __m256i = cast(*bytes);
                let lows = avx._mm256_and_si256(packed, nibble);
                let highs = avx._mm256_and_si256(avx._mm256_srli_epi16::<4>(packed), nibble);
                let pairs = avx._mm256_add_epi16(
                    avx._mm256_maddubs_epi16(lows, cast(*low)),
                    avx._mm256_maddubs_epi16(highs, cast(*high)),
                );
                sums = avx._mm256_add_epi32(sums, avx._mm256_madd_epi16(pairs, ones));
            }
            let lanes: [i32; 8] = cast(sums);
            *slot = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        }
    }
}
