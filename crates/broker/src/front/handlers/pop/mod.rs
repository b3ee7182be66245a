//! RocketMQ 5's POP consumption: pops, acks, changes of invisible time, and the broker-side
//! balancing and request modes that put a group in POP mode.

pub(in crate::front) mod ack;
pub(in crate::front) mod assignment;
pub(in crate::front) mod change_invisible;
pub(in crate::front) mod take;

/// A `POP_CK` handle's fields (`ckOffset popTime invisibleTime reviveQid retry brokerName
/// queueId msgOffset`): the pop time, the one Petrel needs to tell a current handle from a stale one.
fn pop_time_of(extra_info: &str) -> Option<i64> {
    extra_info.split(' ').nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pop_time_is_the_handles_second_field() {
        assert_eq!(
            super::pop_time_of("0 1700000000123 60000 0 0 broker-a 3 7"),
            Some(1_700_000_000_123)
        );
        assert_eq!(super::pop_time_of("0"), None);
        assert_eq!(super::pop_time_of("0 x"), None);
    }
}
