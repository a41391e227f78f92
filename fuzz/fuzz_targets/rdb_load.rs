//! A whole value of our type from untrusted bytes (RESTORE, a replica's full sync, an RDB file):
//! the first byte picks the encoding version (its value mod 9: 0 and 8 must be refused, 1 to 7
//! are the versions `rdb::load` reads), the rest is the value as Redis frames it
//! (`native::ModuleValue`: module opcodes, RDB lengths, RDB strings, LZF). `rdb::load` with
//! `Check::Deep` (RESTORE) and `Check::Shallow` (an RDB under `sanitize-dump-payload no`) must
//! answer Ok or Err: any panic, hang or allocation beyond what the input holds is a finding. A
//! stream it accepts is saved and loaded again with the same check (the same items come back:
//! a server that loaded it can always reload what it saved), a deep-checked one passes
//! `validate_stream`, and every path of the core runs over it (tests/unchecked/ops.rs).
//!
//! Seeds: `fuzz/seeds.py` writes the values of tests/fixtures' RDB files (every encoding) into
//! fuzz/corpus/rdb_load. `make fuzz FUZZ_TARGET=rdb_load`

#![no_main]

#[path = "../../tests/unchecked/ops.rs"]
#[allow(dead_code)] // PATHS is for the deterministic test's report
mod ops;

use libfuzzer_sys::fuzz_target;
use xstream::native::ModuleValue;
use xstream::rdb::{self, Check, VecIo};
use xstream::stream::validate::validate_stream;
use xstream::stream::StreamId;

fuzz_target!(|data: &[u8]| {
    let Some((&v, body)) = data.split_first() else { return };
    let encver = i32::from(v % 9);
    for check in [Check::Deep, Check::Shallow] {
        let Ok(s) = rdb::load(encver, &mut ModuleValue::new(body), check) else { continue };
        assert!((1..=rdb::ENCVER).contains(&encver), "encoding {encver} accepted");
        let mut io = VecIo::default();
        rdb::save(&s, &mut io);
        let items = io.items.clone();
        let back = rdb::load(rdb::ENCVER, &mut io, check).expect("a stream it accepted saves and loads again");
        let mut io2 = VecIo::default();
        rdb::save(&back, &mut io2);
        assert_eq!(items, io2.items, "a reload changes the stream");
        if check == Check::Deep {
            validate_stream(&back).expect("a deep-checked stream is valid");
        }
        let last = s.last_id;
        let probes = [StreamId::MIN, StreamId::new(1, 0), StreamId::new(last.ms, last.seq), StreamId::new(last.ms / 2, 0), StreamId::MAX];
        ops::exercise(&s, &probes);
    }
});
