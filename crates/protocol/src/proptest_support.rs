//! Strategies the crates' property tests share, behind the `proptest` feature, which only their
//! dev-dependencies turn on.
//!
//! Owns: the bodies a request reader's property test feeds it. Must never: be used outside
//! tests (a release build of the binary, which has no dev-dependencies, never compiles it).

use proptest::prelude::*;

/// A request body for a reader's property test: any bytes, or one of `seeds` cut short or with
/// one byte replaced. Random bytes rarely get past a JSON parser's first byte; a damaged seed
/// reaches the reader's checks behind the parse.
///
/// # Panics
/// If `seeds` is empty or holds an empty seed.
pub fn bodies(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    assert!(!seeds.is_empty() && seeds.iter().all(|s| !s.is_empty()), "every seed holds bytes");
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        (0..seeds.len(), any::<usize>(), any::<u8>(), any::<bool>()).prop_map(move |(seed, at, byte, cut)| {
            let mut body = seeds[seed].as_bytes().to_vec();
            let at = at % body.len();
            if cut {
                body.truncate(at);
            } else {
                body[at] = byte;
            }
            body
        }),
    ]
}
