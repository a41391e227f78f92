//! Every path of the core over a stream whose nodes were loaded with
//! `rdb::Check::Shallow` (header only, as RDB loading under
//! `sanitize-dump-payload no`): what each command does to a stream, without the
//! server. Shared by `tests/unchecked_nodes.rs` (deterministic, thousands of
//! corrupted nodes) and the cargo-fuzz target `unchecked_node`.
//!
//! The contract (docs/rdb.md): whatever a node body holds, every path returns;
//! none panics (the caller counts panics with catch_unwind and requires 0), none
//! loops without bound (the caller runs it under a deadline), and the work is
//! linear in the bytes loaded. Answers on corrupt nodes may be wrong.

use xstream::listpack::Value;
use xstream::native;
use xstream::rdb::{self, Check, RdbIn, VecIo};
use xstream::stream::validate::validate_stream;
use xstream::stream::{ClaimCount, IdSpec, LagRules, NodeLimits, RefPolicy, Stream, StreamId, Trim, TrimStrategy};

/// The paths run, by the command they stand for (for the report).
pub const PATHS: &[&str] = &[
    "XS.RANGE",
    "XS.REVRANGE",
    "XS.RANGE COUNT",
    "XS.REVRANGE COUNT",
    "XS.RANGE id id",
    "XS.READ",
    "XS.READGROUP >",
    "XS.READGROUP 0",
    "XS.PENDING",
    "XS.CLAIM",
    "XS.AUTOCLAIM",
    "XS.ACK",
    "XS.INFO STREAM [FULL]",
    "XS.INFO GROUPS",
    "XS.LEN",
    "XS.DEL",
    "XS.TRIM MAXLEN =",
    "XS.TRIM MAXLEN ~",
    "XS.TRIM MINID =",
    "XS.TRIM LIMIT",
    "XS.SETID",
    "XS.ADD (same fields)",
    "XS.ADD (other fields)",
    "XS.EXPORT",
    "DUMP/RESTORE",
    "COPY",
    "MEMORY USAGE",
    "DEBUG DIGEST",
    "AOF rewrite",
];

/// Reads everything an entry holds, as a reply would (field and value bytes).
fn consume(e: &xstream::stream::Entry<'_>, sink: &mut u64) {
    let mut out = Vec::new();
    let mut pairs = 0usize;
    e.for_each_field(|f: Value<'_>, v: Value<'_>| {
        out.clear();
        f.write_to(&mut out);
        v.write_to(&mut out);
        *sink = sink.wrapping_add(out.len() as u64);
        pairs += 1;
    });
    // A reply announces numfields pairs before writing them: exactly that many come.
    assert_eq!(pairs, e.numfields(), "for_each_field must call back numfields times");
    *sink = sink.wrapping_add(e.id().ms ^ e.id().seq).wrapping_add(e.is_deleted() as u64);
}

/// Runs every read path on `s` and every write path on clones of it. `probes`:
/// IDs to look up, delete, trim at (some existing, some not). Returns a value
/// derived from everything read, so nothing is optimised away.
pub fn exercise(s: &Stream, probes: &[StreamId]) -> u64 {
    let mut sink = 0u64;
    // XS.RANGE / XS.REVRANGE, whole and between probes, with and without COUNT;
    // XS.READ is a forward range after an ID.
    for rev in [false, true] {
        for e in s.range(StreamId::MIN, StreamId::MAX, rev) {
            consume(&e, &mut sink);
        }
        for e in s.range_with_tombstones(StreamId::MIN, StreamId::MAX, rev).take(50) {
            consume(&e, &mut sink);
        }
        for w in probes.windows(2) {
            let (a, b) = if w[0] <= w[1] { (w[0], w[1]) } else { (w[1], w[0]) };
            for e in s.range(a, b, rev).take(10) {
                consume(&e, &mut sink);
            }
        }
    }
    for &id in probes {
        for e in s.range(id, id, false) {
            consume(&e, &mut sink);
        }
        sink = sink.wrapping_add(s.contains(id) as u64);
        if let Some(next) = id.next() {
            for e in s.range(next, StreamId::MAX, false).take(5) {
                consume(&e, &mut sink);
            }
        }
    }
    // XS.LEN, XS.INFO STREAM (first/last entry, edges, lag), MEMORY USAGE.
    sink = sink.wrapping_add(s.len()).wrapping_add(s.mem_bytes() as u64).wrapping_add(s.rax_keys() as u64);
    for (first, skip) in [(true, true), (true, false), (false, true), (false, false)] {
        let id = s.edge_id(first, skip);
        sink = sink.wrapping_add(id.ms ^ id.seq);
    }
    sink = sink.wrapping_add(s.last_valid_id().seq);
    for rules in [LagRules::Redis7, LagRules::Redis8] {
        let meta = s.meta(rules);
        if let Some(mut it) = s.groups_iter() {
            while let Some((_, g)) = it.next() {
                sink = sink.wrapping_add(meta.lag(g).unwrap_or(0) as u64);
                // XS.PENDING / XS.INFO STREAM FULL: each pending entry looked up.
                let mut p = g.pel().iter();
                while let Some((k, _)) = p.next() {
                    if let Some(id) = StreamId::from_be_bytes(k) {
                        for e in s.range(id, id, false) {
                            consume(&e, &mut sink);
                        }
                    }
                }
            }
        }
    }
    // DUMP then RESTORE (deep: refused, or a stream that is valid throughout), and
    // the RDB reload with the header check only.
    let mut io = VecIo::default();
    rdb::save(s, &mut io);
    let saved = io.items.clone();
    match rdb::load(rdb::ENCVER, &mut io, Check::Deep) {
        Ok(t) => {
            validate_stream(&t).expect("a deep load is valid");
            sink = sink.wrapping_add(t.len());
        }
        Err(_) => sink = sink.wrapping_add(1),
    }
    let mut io = VecIo { items: saved, pos: 0 };
    if let Ok(t) = rdb::load(rdb::ENCVER, &mut io, Check::Shallow) {
        sink = sink.wrapping_add(t.len());
    }
    let _ = io.get_u64();
    // XS.EXPORT: only a stream valid throughout, without NACKed entries, reaches the built-in's
    // encoding (src/commands/migrate.rs).
    if validate_stream(s).is_ok() && !s.has_nacked() {
        let payload = native::encode_dump(s, true);
        let back = native::decode_dump(&payload).expect("an exported valid stream decodes");
        sink = sink.wrapping_add(back.len());
    }
    // COPY.
    let copy = s.clone();
    sink = sink.wrapping_add(copy.len());

    // Writes, each on its own copy (as many commands on one key would be).
    let limits = NodeLimits { entries_max: 5, bytes_max: 0 };
    let mut t = s.clone();
    sink = sink.wrapping_add(t.delete_ids(probes));
    sink = sink.wrapping_add(t.len());
    for e in t.range(StreamId::MIN, StreamId::MAX, true) {
        consume(&e, &mut sink);
    }
    for (i, &id) in probes.iter().enumerate() {
        let mut t = s.clone();
        let strategy = if i % 2 == 0 { TrimStrategy::MaxLen(id.seq % (s.len() + 2)) } else { TrimStrategy::MinId(id) };
        for (approx, limit) in [(false, 0), (true, 0), (false, 3), (true, 100)] {
            let mut u = t.clone();
            sink = sink.wrapping_add(u.trim(&Trim { strategy, approx, limit }));
            for e in u.range(StreamId::MIN, StreamId::MAX, false) {
                consume(&e, &mut sink);
            }
        }
        // The Redis 8.2 reference policies (XDELEX, XACKDEL, trims with DELREF / ACKED).
        for policy in [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked] {
            let mut u = t.clone();
            sink = sink.wrapping_add(u.trim_with(&Trim { strategy, approx: i % 3 == 0, limit: 0 }, policy).deleted);
            sink = sink.wrapping_add(u.delete_ex(&[id, StreamId::MIN, StreamId::MAX], policy).deleted);
            let mut names: Vec<Vec<u8>> = Vec::new();
            if let Some(mut it) = u.groups_iter() {
                while let Some((k, _)) = it.next() {
                    names.push(k.to_vec());
                }
            }
            for name in names {
                if let Some(o) = u.ack_del(&name, &[id], policy) {
                    sink = sink.wrapping_add(o.deleted);
                }
            }
        }
        sink = sink.wrapping_add(t.trim(&Trim { strategy, approx: false, limit: 0 }));
        sink = sink.wrapping_add(t.delete_ids(&[id]));
    }
    // XS.ADD onto the last node: the same fields as a master could hold, and others.
    let mut t = s.clone();
    let base = if t.last_id.ms < u64::MAX - 10 { t.last_id.ms + 1 } else { 1 };
    for (i, fields) in [&[&b"f"[..], b"1"][..], &[b"a", b"1", b"b", b"2"], &[b"f", b"x"], &[b"g", b"y"]].iter().enumerate() {
        let r = t.append(fields, IdSpec::Explicit(StreamId::new(base, i as u64)), 0, limits);
        sink = sink.wrapping_add(r.is_ok() as u64);
    }
    for e in t.range(StreamId::MIN, StreamId::MAX, true) {
        consume(&e, &mut sink);
    }
    // XS.SETID (metadata only) then a read.
    let mut t = s.clone();
    t.last_id = StreamId::MAX;
    sink = sink.wrapping_add(t.edge_id(false, true).seq);
    // Groups: XS.READGROUP > (NOACK and not), history reads, XS.CLAIM, XS.AUTOCLAIM
    // (claim by scanning the PEL), XS.ACK, then reads of what they left.
    let mut t = s.clone();
    if !t.create_group(b"fuzz", StreamId::MIN, 0) {
        return sink;
    }
    let names: Vec<Vec<u8>> = match t.groups_iter() {
        Some(mut it) => {
            let mut v = Vec::new();
            while let Some((n, _)) = it.next() {
                v.push(n.to_vec());
            }
            v
        }
        None => Vec::new(),
    };
    for (gi, name) in names.iter().enumerate() {
        let Some(g) = t.group_mut(name) else { continue };
        let Some(slot) = g.lookup_consumer(b"c", Some(5)).or_else(|| g.create_consumer(b"c", 5)) else { continue };
        let (n, _) = t.read_group_new(name, slot, StreamId::MIN, 7, gi % 2 == 1, 10, LagRules::Redis7, None, |e, _, _| {
            consume(&e, &mut sink);
            true
        });
        sink = sink.wrapping_add(n);
        // (COUNT-bounded, as are the PEL walks below: a point lookup scans its node,
        // so PEL size x node size is the cost for valid nodes too.)
        let (n, _) = t.read_group_new(name, slot, StreamId::MIN, 100, false, 11, LagRules::Redis8, None, |e, _, _| {
            consume(&e, &mut sink);
            true
        });
        sink = sink.wrapping_add(n);
        let n = t.read_group_history(name, slot, StreamId::MIN, 100, 12, true, |id, e| {
            sink = sink.wrapping_add(id.seq);
            if let Some(e) = e {
                consume(&e, &mut sink);
            }
            true
        });
        sink = sink.wrapping_add(n);
        // XS.AUTOCLAIM / XS.CLAIM: every pending ID (a bounded number), its entry
        // looked up as the command does, claimed by another consumer.
        let pending: Vec<StreamId> = match t.group(name) {
            Some(g) => {
                let mut v = Vec::new();
                let mut p = g.pel().iter();
                while let Some((k, _)) = p.next() {
                    if let Some(id) = StreamId::from_be_bytes(k) {
                        v.push(id);
                    }
                    if v.len() == 100 {
                        break;
                    }
                }
                v
            }
            None => Vec::new(),
        };
        let exists: Vec<bool> = pending.iter().map(|&id| t.contains(id)).collect();
        let Some(g) = t.group_mut(name) else { continue };
        let Some(other) = g.lookup_consumer(b"d", Some(20)).or_else(|| g.create_consumer(b"d", 20)) else { continue };
        // XS.NACK of every other pending ID (ghosts too), FORCE on the probes.
        for &id in pending.iter().step_by(2) {
            sink = sink.wrapping_add(g.nack_entry(id, xstream::stream::NackCount::Silent, false) as u64);
        }
        for (&id, &live) in pending.iter().zip(&exists) {
            if live {
                sink = sink.wrapping_add(g.claim(id, other, xstream::stream::DeliveryTime::Now(30), ClaimCount::Increment, false).is_some() as u64);
            } else {
                sink = sink.wrapping_add(g.ack(id) as u64);
            }
        }
        for &id in probes {
            sink = sink.wrapping_add(g.ack(id) as u64);
        }
        g.check().expect("group state stays consistent");
    }
    for e in t.range(StreamId::MIN, StreamId::MAX, false) {
        consume(&e, &mut sink);
    }
    sink
}
