//! Message selectors: RocketMQ's SQL92 grammar (`MessageSelector.bySql(...)`), compiled once per
//! subscription and evaluated on each stored message's properties by the broker. No I/O and no
//! dependencies: the broker hands it a property lookup.

#![forbid(unsafe_code)]

mod sql92;

pub use sql92::{CompileError, MAX_EXPRESSION_BYTES, MAX_NESTING, MAX_TREE_HEIGHT, Sql92};
