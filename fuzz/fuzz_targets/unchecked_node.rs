//! A node body the RDB load did not deep-check (`rdb::Check::Shallow`, as under
//! `sanitize-dump-payload no`): the input becomes the middle node of a valid
//! three-node stream with groups, behind a valid listpack header and first element
//! (what the shallow check reads), and every path of the core runs over it
//! (tests/unchecked/ops.rs). Any panic or hang is a finding; the deterministic
//! version is tests/unchecked_nodes.rs.
//!
//! `make fuzz FUZZ_TARGET=unchecked_node`

#![no_main]

#[path = "../../tests/unchecked/ops.rs"]
#[allow(dead_code)] // PATHS is for the deterministic test's report
mod ops;

use libfuzzer_sys::fuzz_target;
use xstream::rdb::{self, Check, VecIo, VecItem};
use xstream::stream::{IdSpec, NodeLimits, Stream, StreamId};

fn base() -> Stream {
    let mut s = Stream::new();
    let limits = NodeLimits { entries_max: 4, bytes_max: 0 };
    for i in 0..12u64 {
        let v = (i * 31).to_string();
        let fields: [&[u8]; 2] = [if i % 5 == 4 { b"other" } else { b"f" }, v.as_bytes()];
        s.append(&fields, IdSpec::Explicit(StreamId::new(10 + i, 0)), 0, limits).expect("increasing IDs");
    }
    s.create_group(b"g", StreamId::MIN, 0);
    let g = s.group_mut(b"g").expect("created");
    let c = g.create_consumer(b"c", 1).expect("new");
    for i in [10u64, 14, 15, 21] {
        g.deliver_new(StreamId::new(i, 0), c, 5);
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, body)) = data.split_first() else { return };
    // Header (total bytes, count from the input), the first element (the live
    // count, a 7-bit integer with its backlen), the body, the terminator.
    let count = count & 0x7F;
    let mut node = vec![0u8; 6];
    node[4..6].copy_from_slice(&u16::from_le_bytes([data.len() as u8, 0]).to_le_bytes());
    node.extend_from_slice(&[count, 1]);
    node.extend_from_slice(body);
    node.push(0xFF);
    let total = node.len() as u32;
    node[..4].copy_from_slice(&total.to_le_bytes());

    let s = base();
    let mut io = VecIo::default();
    rdb::save(&s, &mut io);
    let mut items = io.items;
    // Node 1 (of 3) becomes the input; the length follows the counts.
    let length = s.len() - 4 + u64::from(count);
    items[4] = VecItem::Bytes(node);
    let at = 1 + 2 * s.rax_keys();
    items[at] = VecItem::U64(length);
    if let Ok(t) = rdb::load(rdb::ENCVER, &mut VecIo { items, pos: 0 }, Check::Shallow) {
        let probes = [StreamId::new(9, 0), StreamId::new(14, 0), StreamId::new(15, 0), StreamId::new(17, 3), StreamId::new(30, 0)];
        ops::exercise(&t, &probes);
    }
});
