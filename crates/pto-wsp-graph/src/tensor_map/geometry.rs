//! The overlap map's box tests: `Region`'s definition, with less work for the boxes most
//! streams use.
//!
//! Why: the overlap map tests an access's box against its cell's own write and reads and the
//! records listed there (intersects, covers). [`Region::intersects`] and [`Region::covers`]
//! work through all four dimensions in 64 bits, although most streams' boxes use two (the
//! LLaMA layer's), the dimensions past the rank holding start 0 and size 1.
//!
//! Promise: [`meets`] is exactly [`Region::intersects`] and [`covers`] exactly
//! [`Region::covers`], for every pair of regions whatever they hold: dimensions past the rank
//! with any start and size, sizes of 0, coordinates up to `u32::MAX` (`Region`'s fields are
//! public, so a region built directly need not be what [`Region::new`] makes). The definition
//! does not change; only the work does: the first two dimensions are tested as `Region` tests
//! them (64-bit ends: nothing overflows); the last two are compared as two words (starts,
//! sizes), and when both boxes hold start 0 and size 1 there (what [`Region::new`] gives the
//! dimensions past a rank of 2 or less) they intersect and cover each other there, so nothing
//! more is done; otherwise they are tested as `Region` tests them (out of line).

use crate::types::Region;

/// The last two dimensions of `r`: starts, then sizes.
#[inline(always)]
fn tail(r: &Region) -> [[u32; 2]; 2] {
    [[r.start[2], r.start[3]], [r.size[2], r.size[3]]]
}

/// What [`Region::new`] puts past a rank of 2: start 0, size 1.
const UNIT_TAIL: [[u32; 2]; 2] = [[0, 0], [1, 1]];

/// `a.intersects(b)` (see the module promise).
#[inline(always)]
pub(super) fn meets(a: &Region, b: &Region) -> bool {
    let mut ok = a.tensor == b.tensor;
    for d in 0..2 {
        let (x, y) = (a.start[d] as u64, b.start[d] as u64);
        ok &= x < y + b.size[d] as u64 && y < x + a.size[d] as u64;
    }
    ok && ((tail(a) == UNIT_TAIL && tail(b) == UNIT_TAIL) || tails_meet(a, b))
}

/// `a.covers(b)` (see the module promise).
#[inline(always)]
pub(super) fn covers(a: &Region, b: &Region) -> bool {
    let mut ok = a.tensor == b.tensor;
    for d in 0..2 {
        let (x, y) = (a.start[d] as u64, b.start[d] as u64);
        ok &= x <= y && y + b.size[d] as u64 <= x + a.size[d] as u64;
    }
    ok && ((tail(a) == UNIT_TAIL && tail(b) == UNIT_TAIL) || tails_cover(a, b))
}

/// Whether the last two dimensions of `a` and `b` intersect (as `Region` tests them).
#[cold]
#[inline(never)]
fn tails_meet(a: &Region, b: &Region) -> bool {
    (2..4).all(|d| {
        let (x, y) = (a.start[d] as u64, b.start[d] as u64);
        x < y + b.size[d] as u64 && y < x + a.size[d] as u64
    })
}

/// Whether the last two dimensions of `a` cover `b`'s (as `Region` tests them).
#[cold]
#[inline(never)]
fn tails_cover(a: &Region, b: &Region) -> bool {
    (2..4).all(|d| {
        let (x, y) = (a.start[d] as u64, b.start[d] as u64);
        x <= y && y + b.size[d] as u64 <= x + a.size[d] as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MAX_RANK;
    use proptest::array::{uniform2, uniform4};
    use proptest::prelude::*;

    /// A coordinate: small, near `u32::MAX`, or anything.
    fn coord() -> impl Strategy<Value = u32> {
        prop_oneof![
            4 => 0u32..6,
            2 => (0u32..6).prop_map(|k| u32::MAX - k),
            1 => any::<u32>(),
        ]
    }

    /// Regions as `Region::new` makes them (rank 1 to 4, unused dimensions start 0 size 1)
    /// and as anyone may build them directly (any rank field, any start and size, size 0).
    fn region() -> impl Strategy<Value = Region> {
        let made = (
            0u32..2,
            1usize..=MAX_RANK,
            uniform4(0i64..6),
            uniform4(1i64..5),
        )
            .prop_map(|(t, rank, s, z)| Region::new(t, &s[..rank], &z[..rank]).unwrap());
        let near_max = (0usize..MAX_RANK, 0u32..4, 1u32..4).prop_map(|(d, k, z)| {
            let mut r = Region::new_2d(0, 0, 4, 0, 4);
            r.size[d] = z;
            r.start[d] = u32::MAX - z - k;
            r
        });
        let direct = (0u32..2, 0u32..5, uniform4(coord()), uniform4(coord())).prop_map(
            |(tensor, rank, start, size)| Region {
                tensor,
                rank,
                start,
                size,
            },
        );
        prop_oneof![3 => made, 1 => near_max, 2 => direct]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(4096)))]

        /// The prepared tests answer what `Region`'s answer, for any two regions.
        #[test]
        fn the_prepared_tests_are_regions_tests(a in region(), b in region()) {
            prop_assert_eq!(meets(&a, &b), a.intersects(&b));
            prop_assert_eq!(covers(&a, &b), a.covers(&b));
            prop_assert_eq!(meets(&a, &a), a.intersects(&a));
            prop_assert_eq!(covers(&a, &a), a.covers(&a));
        }

        /// Boxes that differ only past their first two dimensions (rank 3 and 4, or fields a
        /// direct build left there): the tail decides.
        #[test]
        fn the_last_two_dimensions_decide_when_the_first_two_agree(
            a in region(),
            tail in (uniform2(0u32..4), uniform2(0u32..3)),
        ) {
            let mut b = a;
            b.start[2..].copy_from_slice(&tail.0);
            b.size[2..].copy_from_slice(&tail.1);
            prop_assert_eq!(meets(&a, &b), a.intersects(&b));
            prop_assert_eq!(meets(&b, &a), b.intersects(&a));
            prop_assert_eq!(covers(&a, &b), a.covers(&b));
            prop_assert_eq!(covers(&b, &a), b.covers(&a));
        }
    }

    /// Worked cases, each against a plain per-dimension loop over the elements' ranges.
    #[test]
    fn edge_boxes() {
        let plain_meets = |a: &Region, b: &Region| {
            a.tensor == b.tensor
                && (0..MAX_RANK).all(|d| {
                    let (a0, a1) = (a.start[d] as u128, a.start[d] as u128 + a.size[d] as u128);
                    let (b0, b1) = (b.start[d] as u128, b.start[d] as u128 + b.size[d] as u128);
                    a0 < b1 && b0 < a1
                })
        };
        let at = |start: [u32; 4], size: [u32; 4]| Region {
            tensor: 0,
            rank: 4,
            start,
            size,
        };
        let m = u32::MAX;
        let cases = [
            (
                at([m - 1, 0, 0, 0], [1, 1, 1, 1]),
                at([m - 1, 0, 0, 0], [1, 1, 1, 1]),
            ),
            (
                at([m - 1, 0, 0, 0], [1, 1, 1, 1]),
                at([m - 2, 0, 0, 0], [1, 1, 1, 1]),
            ),
            (
                at([0, 0, m, 0], [1, 1, m, 1]),
                at([0, 0, m, 0], [1, 1, 1, 1]),
            ),
            (
                at([0, 0, 3, 0], [1, 1, 0, 1]),
                at([0, 0, 3, 0], [1, 1, 0, 1]),
            ),
            (
                at([0, 0, 0, 2], [1, 1, 1, 2]),
                at([0, 0, 0, 3], [1, 1, 1, 1]),
            ),
            (
                at([0, 0, 0, 2], [1, 1, 1, 2]),
                at([0, 0, 0, 4], [1, 1, 1, 1]),
            ),
        ];
        for (a, b) in cases {
            assert_eq!(meets(&a, &b), plain_meets(&a, &b), "{a:?} {b:?}");
            assert_eq!(meets(&a, &b), a.intersects(&b), "{a:?} {b:?}");
            assert_eq!(covers(&a, &b), a.covers(&b), "{a:?} {b:?}");
            assert_eq!(covers(&b, &a), b.covers(&a), "{a:?} {b:?}");
        }
    }
}
