//! A DUMP payload of a built-in stream from untrusted bytes (XS.IMPORT, takeover's adoption of a
//! RESTOREd built-in stream): `native::decode_dump` on the input with a correct CRC-64 appended
//! (so that mutations reach the decoder, not the checksum). It must answer Ok or Err: any panic,
//! hang or allocation beyond what the input holds is a finding. A stream it accepts is valid
//! (`validate_stream`), encodes back to a payload that decodes to the same stream (both DUMP
//! types: 19 for 7.0, 21 for 7.2+), saves and loads in our own encoding, and every path of the
//! core runs over it (tests/unchecked/ops.rs).
//!
//! Seeds: `fuzz/seeds.py` writes DUMP payloads of built-in streams (from a redis-server it
//! starts) into fuzz/corpus/native_dump, without their CRC. `make fuzz FUZZ_TARGET=native_dump`

#![no_main]

#[path = "../../tests/unchecked/ops.rs"]
#[allow(dead_code)] // PATHS is for the deterministic test's report
mod ops;

use libfuzzer_sys::fuzz_target;
use xstream::native;
use xstream::rdb::{self, Check, VecIo};
use xstream::stream::validate::validate_stream;
use xstream::stream::StreamId;

fn items(s: &xstream::stream::Stream) -> Vec<rdb::VecItem> {
    let mut io = VecIo::default();
    rdb::save(s, &mut io);
    io.items
}

fuzz_target!(|data: &[u8]| {
    let mut payload = data.to_vec();
    let crc = native::crc64(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let Ok(s) = native::decode_dump(&payload) else { return };
    validate_stream(&s).expect("an accepted payload is a valid stream");
    let ours = items(&s);
    for active_times in [false, true] {
        let again = native::decode_dump(&native::encode_dump(&s, active_times)).expect("our own encoding decodes");
        // Type 19 has no active-times (a 7.0 server's consumers have none): compared in 21.
        if active_times {
            assert_eq!(items(&again), ours, "a DUMP round trip changes the stream");
        }
    }
    let back = rdb::load(rdb::ENCVER, &mut VecIo { items: ours.clone(), pos: 0 }, Check::Deep).expect("our encoding of it loads");
    assert_eq!(items(&back), ours);
    let last = s.last_id;
    let probes = [StreamId::MIN, StreamId::new(1, 0), StreamId::new(last.ms, last.seq), StreamId::new(last.ms / 2, 0), StreamId::MAX];
    ops::exercise(&s, &probes);
});
