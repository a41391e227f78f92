//! Every `xstream.compat` level on whatever host this runs on (`make test-matrix` runs it on every
//! host): each level's replies for the changes it selects (docs/hosts.md), set with CONFIG SET on
//! one server. The expected values are what the built-in streams of the release answer (checked
//! against the hosts: 7.0.15, 7.2.4, 7.4.1, 8.0.2, 8.2.3, Valkey 8.0.1, 8.1.8, 9.1.2; the
//! differential runners compare `host` with the host's own built-in on every host).

mod common;

use common::*;

const LEVELS: &[&str] = &["7.0", "7.2", "7.4", "8.0", "8.2", "valkey-8.0", "valkey-8.1", "latest"];

fn rank(level: &str) -> u32 {
    match level {
        "7.0" => 70,
        "7.2" => 72,
        "7.4" => 74,
        "8.0" => 80,
        "8.2" => 82,
        // Valkey follows Redis 7.2 (with its own changes, see the callers).
        "valkey-8.0" | "valkey-8.1" => 72,
        _ => 255,
    }
}

/// The names of a RESP2 map reply (a flat array: name, value, name, value...).
fn field_names(r: &Reply) -> Vec<String> {
    r.as_array().iter().step_by(2).map(|n| n.text()).collect()
}

#[test]
fn every_level_answers_as_its_release() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compat"]).as_array()[1].text(), "host");
    let r = c.cmd(&["CONFIG", "SET", "xstream.compat", "7.1"]);
    assert!(r.is_error(), "{r}");
    for level in LEVELS {
        let v = rank(level);
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", level]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compat"]).as_array()[1].text(), *level);
        c.cmd(&["FLUSHALL"]);
        let what = |x: &str| format!("compat {level}: {x}");

        // A read that delivers nothing creates its consumer since 7.2.
        c.cmd(&["XS.ADD", "s", "1-1", "f", "v"]);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$"]);
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "idle", "STREAMS", "s", ">"]);
        assert!(r.is_nil(), "{}: {r}", what("empty read"));
        let consumers = c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]);
        assert_eq!(consumers.as_array().len(), usize::from(v >= 72), "{}", what("consumer of an empty read"));
        // XINFO CONSUMERS / STREAM FULL: `inactive` and `active-time` since 7.2.
        c.cmd(&["XS.ADD", "s", "2-1", "f", "v"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "busy", "STREAMS", "s", ">"]);
        let consumers = c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]);
        let busy = consumers.as_array().iter().find(|x| x.field("name").map(|n| n.text()) == Some("busy".into()));
        let names = field_names(busy.expect("consumer busy"));
        let want: &[&str] = if v >= 72 { &["name", "pending", "idle", "inactive"] } else { &["name", "pending", "idle"] };
        assert_eq!(names, want, "{}", what("XINFO CONSUMERS"));
        let full = c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]);
        let group = &full.field("groups").expect("groups").as_array()[0];
        let first = &group.field("consumers").expect("consumers").as_array()[0];
        let want: &[&str] =
            if v >= 72 { &["name", "seen-time", "active-time", "pel-count", "pending"] } else { &["name", "seen-time", "pel-count", "pending"] };
        assert_eq!(field_names(first), want, "{}", what("XINFO STREAM FULL consumer"));

        // XSETID below the max deleted ID: refused since 7.2.
        c.cmd(&["XS.ADD", "d", "5-1", "f", "v"]);
        c.cmd(&["XS.ADD", "d", "6-1", "f", "v"]);
        c.cmd(&["XS.DEL", "d", "6-1"]);
        let r = c.cmd(&["XS.SETID", "d", "5-5"]);
        if v >= 72 {
            assert_eq!(r, Reply::Error("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id".into()), "{}", what("XSETID"));
        } else {
            assert_eq!(r, Reply::Simple("OK".into()), "{}", what("XSETID"));
        }

        // Unbalanced key/ID lists.
        let r = c.cmd(&["XS.READ", "STREAMS", "a", "b", "0"]);
        let want = match v {
            70 => "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
            72 | 74 => "ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
            _ => "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.",
        };
        assert_eq!(r, Reply::Error(want.into()), "{}", what("unbalanced XREAD"));
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">"]);
        let want = if v == 70 {
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
        } else {
            "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
        };
        assert_eq!(r, Reply::Error(want.into()), "{}", what("unbalanced XREADGROUP"));

        // The HELP footer.
        let help = c.cmd(&["XS.INFO", "HELP"]);
        let last = help.as_array().last().map(|x| x.text()).unwrap_or_default();
        assert_eq!(last, if v >= 72 { "    Print this help." } else { "    Prints this help." }, "{}", what("HELP"));

        // BLOCK from a script: an error before 7.4, a non-blocking read since.
        let r = c.cmd(&["EVAL", "return redis.call('XS.READ', 'BLOCK', '0', 'STREAMS', 's', '0')", "0"]);
        if v >= 74 || level.starts_with("valkey") {
            assert!(!r.is_error(), "{}: {r}", what("BLOCK in a script"));
        } else {
            assert!(r.is_error() && r.text().contains("command is not allowed with BLOCK option from scripts"), "{}: {r}", what("BLOCK in a script"));
        }

        // A history read counts one change before 7.4, none since.
        let before = dirty(&mut c);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "busy", "STREAMS", "s", "0"]);
        assert_eq!(dirty(&mut c) - before, i64::from(v < 74), "{}", what("dirty counter of a history read"));

        // Lag (REDIS8.md 1.4): a group created behind the first entry with an entries-read past
        // the end: 7.x computes entries-added - entries-read, 8.0 the stream's length.
        c.cmd(&["XS.ADD", "l", "1-0", "f", "v"]);
        c.cmd(&["XS.ADD", "l", "2-0", "f", "v"]);
        c.cmd(&["XS.ADD", "l", "3-0", "f", "v"]);
        c.cmd(&["XS.GROUP", "CREATE", "l", "g", "0", "ENTRIESREAD", "7"]);
        let groups = c.cmd(&["XS.INFO", "GROUPS", "l"]);
        let lag = groups.as_array()[0].field("lag").expect("lag").as_int();
        assert_eq!(lag, if v >= 80 { 3 } else { -4 }, "{}", what("lag"));
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", "host"]), Reply::Simple("OK".into()));
}

/// A blocked XREADGROUP whose key is deleted: 7.0 answers UNBLOCKED, 7.2+ re-executes the command
/// and answers NOGROUP.
#[test]
fn blocked_group_reader_of_a_deleted_key_per_level() {
    let s = Server::start();
    let mut admin = s.conn();
    for level in LEVELS {
        assert_eq!(admin.cmd(&["CONFIG", "SET", "xstream.compat", level]), Reply::Simple("OK".into()));
        let r = blocked_group_reader_after(&s, &mut admin, |a| {
            a.cmd(&["DEL", "k"]);
        });
        let want = if rank(level) >= 72 {
            "NOGROUP No such key 'k' or consumer group 'g' in XREADGROUP with GROUP option"
        } else {
            "UNBLOCKED the stream key no longer exists"
        };
        assert_eq!(r, Reply::Error(want.into()), "compat {level}");
    }
}

/// MOVE of a stream leaves the client in the DB it runs in. Valkey 8.1 runs a module's keyspace
/// callback on the executing client selected to the event's DB and does not select it back
/// (valkey-io/valkey #1819, fixed by #4024, not in 8.1.8): the module's subscription would leave
/// the client of `MOVE key 1` in DB 1. The module selects the source DB again at `move_to`.
#[test]
fn move_leaves_the_client_in_its_db() {
    let s = Server::start();
    let mut c = s.conn();
    for (make, len) in [("XS.ADD", "XS.LEN"), ("XADD", "XLEN")] {
        c.cmd(&["FLUSHALL"]);
        assert_eq!(c.cmd(&["SET", "a", "1"]), Reply::Simple("OK".into()));
        c.cmd(&[make, "s", "1-0", "f", "v"]);
        assert_eq!(c.cmd(&["MOVE", "s", "1"]), Reply::Int(1), "{make}");
        assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(b"1".to_vec()), "{make}: the client left DB 0");
        assert_eq!(c.cmd(&["EXISTS", "s"]), Reply::Int(0), "{make}");
        assert_eq!(c.cmd(&["SET", "m", "x"]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["MOVE", "m", "1"]), Reply::Int(1), "{make}");
        assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(b"1".to_vec()), "{make}: the client left DB 0");
        assert_eq!(c.cmd(&["SELECT", "1"]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&[len, "s"]), Reply::Int(1), "{make}");
        assert_eq!(c.cmd(&["GET", "m"]), Reply::Bulk(b"x".to_vec()), "{make}");
        assert_eq!(c.cmd(&["MOVE", "s", "0"]), Reply::Int(1), "{make}");
        assert_eq!(c.cmd(&["EXISTS", "s"]), Reply::Int(0), "{make}: the client left DB 1");
        assert_eq!(c.cmd(&["SELECT", "0"]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&[len, "s"]), Reply::Int(1), "{make}");
    }
}
