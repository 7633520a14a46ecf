//! Philox4x32-10, the counter-based random number generator of Random123
//! (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
//!
//! A counter-based generator is a pure function `(counter, key) -> 128 random bits`. There is no
//! state to seed, store or advance, which is exactly what a GPU wants: any thread can produce
//! the random numbers of any (row, step, element) directly, in any order, and the CPU reference
//! produces the same bits from the same counter. Names and constants follow Random123's
//! `include/Random123/philox.h`.

/// Multiplier of the first lane pair (Random123's `PHILOX_M4x32_0`).
pub const PHILOX_M4X32_0: u32 = 0xD251_1F53;
/// Multiplier of the second lane pair (Random123's `PHILOX_M4x32_1`).
pub const PHILOX_M4X32_1: u32 = 0xCD9E_8D57;
/// First Weyl key increment: the golden ratio, `(sqrt(5) - 1) / 2 * 2^32` (`PHILOX_W32_0`).
pub const PHILOX_W32_0: u32 = 0x9E37_79B9;
/// Second Weyl key increment: `(sqrt(3) - 1) * 2^32` (`PHILOX_W32_1`).
pub const PHILOX_W32_1: u32 = 0xBB67_AE85;
/// Rounds. Random123's default; its authors found no statistical flaws with 8 or more
/// (BigCrush), and 10 leaves a safety margin. This crate uses only the 10-round version.
pub const PHILOX_ROUNDS: usize = 10;

/// 128-bit counter: four 32-bit words.
pub type Ctr = [u32; 4];
/// 64-bit key: two 32-bit words.
pub type Key = [u32; 2];

/// The full 64-bit product of two words, as `(hi, lo)`. On the GPU this is one
/// `mul.wide.u32` (SASS `IMAD.WIDE.U32`), written in PTX (see `gpu::device::sfu::mul_wide_u32`).
#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::gpu::device::sfu::mul_wide_u32(a, b)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let product = u64::from(a) * u64::from(b);
        ((product >> 32) as u32, product as u32)
    }
}

/// One Philox round: two multiplications, and the high halves mixed with the other words and
/// the key.
#[inline(always)]
fn round(ctr: Ctr, key: Key) -> Ctr {
    let (hi0, lo0) = mulhilo(PHILOX_M4X32_0, ctr[0]);
    let (hi1, lo1) = mulhilo(PHILOX_M4X32_1, ctr[2]);
    [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0]
}

/// The key schedule: a Weyl sequence, one increment between rounds.
#[inline(always)]
fn bumpkey(key: Key) -> Key {
    [
        key[0].wrapping_add(PHILOX_W32_0),
        key[1].wrapping_add(PHILOX_W32_1),
    ]
}

/// Philox4x32 with 10 rounds: 128 random bits for a counter under a key.
///
/// The loop has a constant trip count, so it is fully unrolled on both targets.
///
/// ```
/// use fused_mh_kernel::philox::philox4x32_10;
/// // Random123's first known-answer vector: counter 0, key 0.
/// assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
/// ```
#[inline(always)]
pub fn philox4x32_10(ctr: Ctr, key: Key) -> Ctr {
    philox4x32_10_with(
        ctr[0],
        ctr[1],
        &FirstRoundHalf::new(ctr[2], ctr[3], key),
        key,
    )
}

/// The half of Philox's first round that depends only on counter words 2 and 3 and the key.
///
/// Round 1 multiplies word 2 and passes word 3 through to an XOR. When many calls share those
/// words — in this crate's counter scheme they are the step, the same for a whole launch — that
/// half is computed once and [`philox4x32_10_with`] does the rest: one multiplication and
/// two XORs fewer per call, the same bits.
#[derive(Clone, Copy, Debug)]
pub struct FirstRoundHalf {
    /// `hi(M1 * ctr[2]) ^ key[0]`, round 1's output word 0 before the XOR with `ctr[1]`.
    word0: u32,
    /// `lo(M1 * ctr[2])`, round 1's output word 1.
    word1: u32,
    /// `ctr[3] ^ key[1]`, XORed into round 1's output word 2.
    word2: u32,
}

impl FirstRoundHalf {
    /// The half of round 1 for counter words 2 and 3 under `key`.
    #[inline(always)]
    pub fn new(ctr2: u32, ctr3: u32, key: Key) -> Self {
        let (hi1, lo1) = mulhilo(PHILOX_M4X32_1, ctr2);
        FirstRoundHalf {
            word0: hi1 ^ key[0],
            word1: lo1,
            word2: ctr3 ^ key[1],
        }
    }
}

/// [`philox4x32_10`] of the counter `[ctr0, ctr1, ctr2, ctr3]`, given `half` =
/// [`FirstRoundHalf::new`]`(ctr2, ctr3, key)`: the same 128 bits.
#[inline(always)]
pub fn philox4x32_10_with(ctr0: u32, ctr1: u32, half: &FirstRoundHalf, key: Key) -> Ctr {
    // Round 1, as `round`, with the half that does not depend on ctr0 and ctr1 precomputed.
    let (hi0, lo0) = mulhilo(PHILOX_M4X32_0, ctr0);
    let mut ctr = [half.word0 ^ ctr1, half.word1, hi0 ^ half.word2, lo0];
    let mut key = key;
    for _ in 1..PHILOX_ROUNDS {
        key = bumpkey(key);
        ctr = round(ctr, key);
    }
    ctr
}

/// The part of Philox's first two rounds that depends only on counter words 0 and 3 and the
/// key: round 1's product of word 0, and round 2's product of what round 1 makes of word 0
/// and word 3.
///
/// In this crate's counter scheme word 0 is the quad and word 3 the step's high word: within a
/// launch of the fused kernel, whose steps share their high word, a lane's quads keep these
/// values for every step, so the kernel computes them once per launch and each step's call
/// ([`philox4x32_10_with_halves`]) does one multiplication fewer. The same bits.
#[derive(Clone, Copy, Debug)]
pub struct SecondRoundHalf {
    /// `hi(M1 * w2) ^ bumpkey(key)[0]`, with `w2 = hi(M0 * ctr[0]) ^ ctr[3] ^ key[1]` round
    /// 1's output word 2: round 2's output word 0 before the XOR with round 1's word 1.
    word0: u32,
    /// `lo(M1 * w2)`, round 2's output word 1.
    word1: u32,
    /// `lo(M0 * ctr[0]) ^ bumpkey(key)[1]`, round 1's output word 3 with round 2's key,
    /// XORed into round 2's output word 2.
    word3: u32,
}

impl SecondRoundHalf {
    /// The half of rounds 1 and 2 for counter words 0 and 3 under `key`.
    #[inline(always)]
    pub fn new(ctr0: u32, ctr3: u32, key: Key) -> Self {
        let (hi0, lo0) = mulhilo(PHILOX_M4X32_0, ctr0);
        let key2 = bumpkey(key);
        let (hi1, lo1) = mulhilo(PHILOX_M4X32_1, hi0 ^ ctr3 ^ key[1]);
        SecondRoundHalf {
            word0: hi1 ^ key2[0],
            word1: lo1,
            word3: lo0 ^ key2[1],
        }
    }
}

/// [`philox4x32_10`] of the counter `[ctr0, ctr1, ctr2, ctr3]`, given `first` =
/// [`FirstRoundHalf::new`]`(ctr2, ctr3, key)` and `second` =
/// [`SecondRoundHalf::new`]`(ctr0, ctr3, key)`: the same 128 bits, with round 1 an XOR and
/// round 2 one multiplication.
#[inline(always)]
pub fn philox4x32_10_with_halves(
    ctr1: u32,
    first: &FirstRoundHalf,
    second: &SecondRoundHalf,
    key: Key,
) -> Ctr {
    // Round 1's word 0 (its other words are in the halves), then round 2 as `round` with the
    // product of word 2 precomputed.
    let (hi0, lo0) = mulhilo(PHILOX_M4X32_0, first.word0 ^ ctr1);
    let mut ctr = [
        second.word0 ^ first.word1,
        second.word1,
        hi0 ^ second.word3,
        lo0,
    ];
    let mut key = bumpkey(key);
    for _ in 2..PHILOX_ROUNDS {
        key = bumpkey(key);
        ctr = round(ctr, key);
    }
    ctr
}

/// Random123's `tests/kat_vectors`, philox4x32 with 10 rounds: (counter, key, expected).
/// The same table is checked on the CPU (unit tests) and on the GPU by many threads
/// at once (`tests/gpu.rs`).
pub const PHILOX4X32_10_KAT: [(Ctr, Key, Ctr); 3] = [
    (
        [0, 0, 0, 0],
        [0, 0],
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
    ),
    (
        [0xffff_ffff; 4],
        [0xffff_ffff, 0xffff_ffff],
        [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
    ),
    (
        [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
        [0xa409_3822, 0x299f_31d0],
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_vectors() {
        for (ctr, key, expected) in PHILOX4X32_10_KAT {
            let got = philox4x32_10(ctr, key);
            assert_eq!(
                got, expected,
                "philox4x32_10(ctr {ctr:08x?}, key {key:08x?}) = {got:08x?}, want {expected:08x?}"
            );
        }
    }

    #[test]
    fn the_split_rounds_are_the_plain_rounds() {
        // philox4x32_10 goes through philox4x32_10_with, so the known answers above check the
        // split; here it, and round 2's split too, are checked against the unsplit rounds
        // written out, on counters and keys drawn over the whole 32-bit range.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(7);
        for _ in 0..10_000 {
            let ctr: Ctr = rng.random();
            let key: Key = rng.random();
            let mut plain = round(ctr, key);
            let mut k = key;
            for _ in 1..PHILOX_ROUNDS {
                k = bumpkey(k);
                plain = round(plain, k);
            }
            assert_eq!(
                philox4x32_10(ctr, key),
                plain,
                "ctr {ctr:08x?} key {key:08x?}"
            );
            // And with round 2's half precomputed too (the fused kernel's way).
            let first = FirstRoundHalf::new(ctr[2], ctr[3], key);
            let second = SecondRoundHalf::new(ctr[0], ctr[3], key);
            assert_eq!(
                philox4x32_10_with_halves(ctr[1], &first, &second, key),
                plain,
                "halves: ctr {ctr:08x?} key {key:08x?}"
            );
        }
    }

    #[test]
    fn every_counter_word_and_key_word_changes_the_output() {
        // A counter scheme only gives independent streams if each coordinate reaches the
        // output; flip one bit of each word and require a different block.
        let ctr = [1, 2, 3, 4];
        let key = [5, 6];
        let base = philox4x32_10(ctr, key);
        for w in 0..4 {
            let mut c = ctr;
            c[w] ^= 1;
            assert_ne!(philox4x32_10(c, key), base, "counter word {w} ignored");
        }
        for w in 0..2 {
            let mut k = key;
            k[w] ^= 1;
            assert_ne!(philox4x32_10(ctr, k), base, "key word {w} ignored");
        }
    }
}
