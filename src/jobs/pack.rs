//! Compression of sealed nodes off the append path (issue 18, `xstream.compression`).
//!
//! XS.ADD seals a full node without compressing it: the node goes on its stream's `pack_queue`
//! and the stream's (db, key) into [`PACK`]; this job then compresses queued nodes, a bounded
//! amount per tick (NODES_PER_TICK nodes or TICK_BUDGET of time), oldest stream first. The
//! node layout is not replicated: every server (primary or replica) runs this with its own
//! setting, and nothing is propagated or signalled (the content does not change). Keys are
//! looked up by name when the step runs: a key deleted, renamed, moved or flushed meanwhile is
//! skipped when it is not ours or has nothing queued (a renamed or moved stream is queued again
//! under its new name when it arrives, or at its next seal); SWAPDB carries the queued keys of
//! the two databases with it (`ffi::timer::swap_db`).

use crate::ffi::ctx::Ctx;
use crate::ffi::timer::Job;
use crate::ops::due::PACK;
use crate::stream::Stream;
use std::time::{Duration, Instant};

/// Nodes compressed per tick at most.
const NODES_PER_TICK: usize = 256;
/// Time spent per tick at most (checked between nodes: a 4 KB node takes a few µs).
const TICK_BUDGET: Duration = Duration::from_micros(1000);

/// While a compaction pass runs (src/jobs/tier.rs), a tick every this many ms (each spends
/// at most the tiering step's time budget, 2 ms).
const COMPACT_TICK_MS: i64 = 10;
/// While the segment store is open, a tick at least every this many ms.
const IDLE_TICK_MS: i64 = 100;

pub struct Pack;

impl Job for Pack {
    fn name(&self) -> &'static str {
        "compression timer"
    }

    fn tick(&self, c: &Ctx) {
        let start = Instant::now();
        let home = c.selected_db();
        let mut left = NODES_PER_TICK;
        while left > 0 && start.elapsed() < TICK_BUDGET {
            let Some((db, key)) = PACK.pop() else { break };
            if !c.select_db(db) {
                continue;
            }
            // Opened for reading: no expiry deletion, no keyspace side effect (the value is
            // our own memory, changed in layout only).
            let mut k = c.open_key_named(&key, false);
            let Some(s) = k.stream_mut() else { continue };
            let mut sealed = Vec::new();
            let taken = s.pack_queued_then(left, || start.elapsed() < TICK_BUDGET, |id, bytes| sealed.push((id, bytes)));
            super::tier::queue(db, &key, sealed);
            let more = !s.pack_queue().is_empty();
            drop(k);
            left = left.saturating_sub(taken.max(1));
            if more {
                PACK.push_back((db, key));
            }
        }
        c.select_db(home);
        super::tier::step(c);
        PACK.rearm(c);
        if super::tier::over_budget() {
            PACK.arm(c);
        } else if super::tier::compacting() {
            PACK.arm_in(c, COMPACT_TICK_MS);
        } else if crate::stream::tiering() {
            // Records are released by deletes that run no command of ours (DEL, UNLINK,
            // FLUSHALL, expiry): while the store is open the step looks for sparse segments
            // at this pace (a look is a walk of the segments' table).
            PACK.arm_in(c, IDLE_TICK_MS);
        }
    }

    fn arrived(&self, c: &Ctx, db: i32, key: &[u8], s: &mut Stream) {
        if crate::stream::compression() {
            PACK.note(c, db, key);
        }
        if crate::stream::tiering() {
            super::tier::arrived(db, key, s);
            PACK.arm(c);
        }
    }

    fn loading_ended(&self, c: &Ctx) {
        super::tier::requeue_all(c);
        if super::tier::over_budget() {
            PACK.arm(c);
        }
    }

    fn swapped_db(&self, a: i32, b: i32) {
        super::tier::swap_db(a, b);
    }

    fn info(&self, out: &mut Vec<(&'static str, i64)>) {
        out.push(("compression_queued_keys", PACK.len() as i64));
        let c = crate::listpack::decoded::stats();
        out.push(("compression_cache_bytes", c.bytes as i64));
        out.push(("compression_cache_nodes", c.nodes as i64));
        out.push(("compression_cache_hits", c.hits as i64));
        out.push(("compression_cache_misses", c.misses as i64));
        super::tier::info(out);
    }
}

/// `xstream.tier-dir` or `-memory` changed: the streams already there are queued again (their
/// sealed nodes in RAM, oldest first per stream), and the step runs.
pub fn tiering_changed(c: &Ctx) {
    super::tier::requeue_all(c);
    if super::tier::over_budget() {
        PACK.arm(c);
    }
}
