//! XS.PENDING key group [[IDLE min-idle-time] start end count [consumer]]

use super::{is_kw, parse_ll};
use crate::error::{Error, NoGroup, Result};
use crate::ffi::ctx::{Ctx, KeyKind};
use crate::stream::StreamId;

pub fn run(c: &Ctx) -> Result<()> {
    let argc = c.argc();
    let justinfo = argc == 3;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(Error::Syntax);
    }
    let mut start = StreamId::MIN;
    let mut end = StreamId::MAX;
    let mut count: i64 = 0;
    let mut minidle: i64 = 0;
    let mut consumer_arg = None;
    if argc >= 6 {
        let mut startidx = 3;
        if is_kw(c.arg(3), "IDLE") {
            minidle = parse_ll(c.arg(4))?;
            if argc < 8 {
                return Err(Error::Syntax);
            }
            startidx += 2;
        }
        count = parse_ll(c.arg(startidx + 2))?.max(0);
        let (s, ex) = StreamId::parse_interval(c.arg(startidx), 0).ok_or(Error::InvalidId)?;
        start = if ex { s.next().ok_or(Error::Err("invalid start ID for the interval"))? } else { s };
        let (e, ex) = StreamId::parse_interval(c.arg(startidx + 1), u64::MAX).ok_or(Error::InvalidId)?;
        end = if ex { e.prev().ok_or(Error::Err("invalid end ID for the interval"))? } else { e };
        if startidx + 3 < argc {
            consumer_arg = Some(startidx + 3);
        }
    }
    let key = c.key(1, false);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let gname = c.arg(2);
    let Some(g) = key.stream().and_then(|s| s.group(gname)) else {
        return Err(Error::no_group(NoGroup::KeyOrGroup, c.arg(1), gname));
    };
    if justinfo {
        c.reply_array(4);
        c.reply_int(g.pel().len() as i64);
        if g.pel().is_empty() {
            c.reply_null();
            c.reply_null();
            c.reply_null_array();
            return Ok(());
        }
        let first = g.pel().edge_with(true, |k, _| StreamId::from_be_bytes(k)).flatten().unwrap_or_default();
        let last = g.pel().edge_with(false, |k, _| StreamId::from_be_bytes(k)).flatten().unwrap_or_default();
        c.reply_id(first);
        c.reply_id(last);
        c.reply_array_postponed();
        let mut n = 0;
        let mut it = g.consumers();
        while let Some((_, cons)) = it.next_consumer() {
            if cons.pel().is_empty() {
                continue;
            }
            c.reply_array(2);
            c.reply_bulk(&cons.name);
            c.reply_bulk_int(cons.pel().len() as i64);
            n += 1;
        }
        c.set_array_len(n);
        return Ok(());
    }
    // Extended form: from the group PEL, or from one consumer's.
    let now = c.now_ms() as i64;
    let mut count = count as u64;
    let cons_pel = match consumer_arg {
        Some(i) => match g.find_consumer(c.arg(i)).and_then(|sl| g.consumer(sl)) {
            Some(cons) => Some(cons.pel()),
            None => {
                c.reply_array(0);
                return Ok(());
            }
        },
        None => None,
    };
    c.reply_array_postponed();
    let mut n = 0;
    let endkey = end.to_be_bytes();
    // `nack` is the group PEL's entry when the walk is over the group PEL itself.
    let mut emit = |k: &[u8], nack: Option<&crate::stream::group::Nack>| -> bool {
        if count == 0 || k > &endkey[..] {
            return false;
        }
        let Some(nack) = nack.or_else(|| g.pel().get(k)) else { return true };
        // 8.8: a NACKed (unowned) entry shows owner "" and idle -1, and the IDLE
        // filter never excludes it.
        let unowned = nack.is_unowned();
        if minidle != 0 && !unowned && now - nack.delivery_time < minidle {
            return true;
        }
        n += 1;
        count -= 1;
        c.reply_array(4);
        c.reply_id(StreamId::from_be_bytes(k).unwrap_or_default());
        c.reply_bulk(g.owner_name(nack));
        c.reply_int(if unowned { -1 } else { (now - nack.delivery_time).max(0) });
        c.reply_int(nack.delivery_count as i64);
        true
    };
    match cons_pel {
        Some(pel) => {
            let mut it = crate::stream::group::pel_from(pel, start);
            while let Some((k, _)) = it.next() {
                if !emit(k, None) {
                    break;
                }
            }
        }
        None => {
            let mut it = crate::stream::group::pel_from(g.pel(), start);
            while let Some((k, nack)) = it.next() {
                if !emit(k, Some(nack)) {
                    break;
                }
            }
        }
    }
    c.set_array_len(n);
    Ok(())
}
