//! ACL and key specs (issue 8).
//!
//! - `acl_matches_builtin`: for users with key permissions (`%R~k*`, `%W~k*`, `~k*`, `%R~k* %W~j*`,
//!   `~j*` ...) and command permissions (`-@all +xs.range`, `+@all -xs.add`, `-@all +@read`,
//!   `-@all +@write`, `+@all -@write`, subcommand rules `+xs.group|create` ...), every XS.*
//!   command and subcommand is allowed or denied exactly as its built-in twin for the twin user
//!   (the same rules with the built-in's names), with the same error text modulo the command
//!   name, through a real call and through `ACL DRYRUN`. The built-in runs in DB 0, the module
//!   in DB 1, with the same key names; the data is reset before every call.
//! - `getkeys_match_builtin`: `COMMAND GETKEYSANDFLAGS` gives the built-in's keys and flags for
//!   every XS.* command (many argument shapes), and `COMMAND INFO` the built-in's arity,
//!   first/last/step, flags (but `module`) and key specs.
//!
//! Redis 7.0 cannot put module commands into `@stream` (COMPAT.md §5): rules naming `@stream`
//! are not compared.

mod common;
#[path = "common/twin.rs"]
mod twin;

use common::*;
use twin::*;

/// Command templates (built-in names); `K` is replaced by the key under test, `J` by a key
/// outside every `~k*` pattern.
const COMMANDS: &[&str] = &[
    "XADD K 999-1 f v",
    "XADD K NOMKSTREAM MAXLEN 100 999-2 f v",
    "XLEN K",
    "XRANGE K - +",
    "XREVRANGE K + - COUNT 1",
    "XDEL K 1-1",
    "XTRIM K MAXLEN 100",
    "XSETID K 999999-0",
    "XINFO STREAM K",
    "XINFO STREAM K FULL",
    "XINFO GROUPS K",
    "XINFO CONSUMERS K g",
    "XINFO HELP",
    "XREAD STREAMS K 0",
    "XREAD COUNT 1 STREAMS K J 0 0",
    "XREADGROUP GROUP g c STREAMS K >",
    "XREADGROUP GROUP g c COUNT 1 NOACK STREAMS K 0",
    "XGROUP CREATE K g2 $",
    "XGROUP CREATE K g2 $ MKSTREAM",
    "XGROUP CREATECONSUMER K g c5",
    "XGROUP DELCONSUMER K g c",
    "XGROUP SETID K g 0",
    "XGROUP DESTROY K g",
    "XGROUP HELP",
    "XACK K g 1-1",
    "XPENDING K g",
    "XPENDING K g - + 10 c",
    "XCLAIM K g c2 0 1-1",
    "XAUTOCLAIM K g c2 0 0",
];

/// Users: rules with `{XRANGE}`-style placeholders for command names.
const USERS: &[&str] = &[
    "~* +@all",
    "%R~k* +@all",
    "%W~k* +@all",
    "~k* +@all",
    "%RW~k* +@all",
    "%R~k* %W~j* +@all",
    "%R~* %W~k* +@all",
    "~j* +@all",
    "resetkeys +@all",
    "~* -@all +{XRANGE}",
    "~k* -@all +{XRANGE}",
    "~* -@all +{XADD} +{XRANGE} +{XREADGROUP}",
    "~* +@all -{XADD}",
    "~* +@all -{XINFO}",
    "~* -@all +{XINFO}",
    "~* -@all +{XINFO|STREAM} +{XGROUP|CREATE}",
    "~* +@all -{XGROUP|DESTROY} -{XINFO|HELP}",
    "~* -@all +@read",
    "~* -@all +@write",
    "~* +@all -@write",
    "~* -@all +@fast",
    "~* -@all +@slow",
    "~* -@all +@blocking",
    "~* +@all -@blocking",
    "%R~k* -@all +@read +@write",
    "%W~k* -@all +@write",
];

fn map_rules(rules: &str, module: bool) -> Vec<String> {
    rules
        .split(' ')
        .map(|r| {
            let mut out = r.to_string();
            if let (Some(a), Some(b)) = (r.find('{'), r.find('}')) {
                let name = &r[a + 1..b];
                let (cmd, sub) = match name.split_once('|') {
                    Some((c, s)) => (c, Some(s)),
                    None => (name, None),
                };
                let mut n = xcmd(module, cmd).to_lowercase();
                if let Some(s) = sub {
                    n = format!("{n}|{}", s.to_lowercase());
                }
                out = format!("{}{}{}", &r[..a], n, &r[b + 1..]);
            }
            out
        })
        .collect()
}

fn expand(tpl: &str, key: &str) -> Vec<String> {
    tpl.split(' ')
        .map(|w| match w {
            "K" => key.to_string(),
            "J" => "j".to_string(),
            w => w.to_string(),
        })
        .collect()
}

/// Resets keys `k` and `j` on one side: 3 entries, group g read by consumer c.
fn reset(c: &mut Conn, module: bool) {
    c.cmd(&["FLUSHDB"]);
    for key in ["k", "j"] {
        for i in 1..=3 {
            c.cmd(&[&xcmd(module, "XADD"), key, &format!("{i}-1"), "f", "v"]);
        }
        c.cmd(&[&xcmd(module, "XGROUP"), "CREATE", key, "g", "0"]);
        c.cmd(&[&xcmd(module, "XREADGROUP"), "GROUP", "g", "c", "STREAMS", key, ">"]);
    }
}

fn auth(s: &Server, user: &str, db: &str) -> Conn {
    let mut c = s.conn();
    let r = c.cmd(&["AUTH", user, "pw"]);
    assert_eq!(r, Reply::Simple("OK".into()), "AUTH {user}");
    let r = c.cmd(&["SELECT", db]);
    assert_eq!(r, Reply::Simple("OK".into()), "SELECT as {user}");
    c
}

/// True if the rules name an ACL category other than @all.
fn uses_categories(rules: &str) -> bool {
    rules.split(' ').any(|r| (r.starts_with("+@") || r.starts_with("-@")) && r != "+@all" && r != "-@all")
}

fn is_noperm(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("NOPERM"))
}

#[test]
fn acl_matches_builtin() {
    let s = Server::start();
    let mut admin_b = s.conn();
    let mut admin_m = s.conn();
    admin_m.cmd(&["SELECT", "1"]);
    // Redis 7.0 gives module commands no ACL category at all (no @read / @write / @fast /
    // @slow / @blocking, and no API to add one): for users whose rules name categories, the
    // module side must then behave as the same user without those category rules, and the
    // divergence from the built-in is reported. Where the server does give the module's
    // commands categories (7.2+), every user must match the built-in exactly.
    let info = admin_b.cmd(&["COMMAND", "INFO", "xs.add"]);
    let module_categories = info.as_array()[0].as_array().get(6).map(|c| !c.as_array().is_empty()).unwrap_or(false);
    let mut calls = 0;
    let mut denied = 0;
    let mut diffs: Vec<String> = Vec::new();
    // (rules, built-in denies but module allows, built-in allows but module denies)
    let mut platform: Vec<(&str, Vec<String>, Vec<String>)> = Vec::new();
    for (ui, rules) in USERS.iter().enumerate() {
        let cat = uses_categories(rules) && !module_categories;
        let ref_rules: String = if cat { rules.split(' ').filter(|r| !uses_categories(r)).collect::<Vec<_>>().join(" ") } else { rules.to_string() };
        let (ub, um, ur) = (format!("b{ui}"), format!("m{ui}"), format!("r{ui}"));
        for (user, module, rl) in [(&ub, false, *rules), (&um, true, *rules), (&ur, true, ref_rules.as_str())] {
            let mut a = vec!["ACL".to_string(), "SETUSER".into(), user.clone(), "reset".into(), "on".into(), ">pw".into()];
            a.extend(map_rules(rl, module).into_iter().filter(|r| !r.is_empty()));
            // SELECT is needed to reach DB 1 (it is not a stream command).
            a.push("+select".into());
            let r = admin_b.cmd(&a);
            assert_eq!(r, Reply::Simple("OK".into()), "{}", fmt_cmd(&a));
        }
        let mut cb = auth(&s, &ub, "0");
        let mut cm = auth(&s, &um, "1");
        let mut cr = auth(&s, &ur, "1");
        let (mut more, mut less) = (Vec::new(), Vec::new());
        for tpl in COMMANDS {
            for key in ["k", "j"] {
                if key == "j" && !tpl.contains('K') {
                    continue;
                }
                let args = expand(tpl, key);
                let margs = module_args(&args);
                // Dry run first (no effect), then the real call on fresh data.
                let dry = |admin: &mut Conn, user: &str, a: &[Vec<u8>]| -> Reply {
                    let mut d: Vec<Vec<u8>> = vec![b"ACL".to_vec(), b"DRYRUN".to_vec(), user.as_bytes().to_vec()];
                    d.extend(a.iter().cloned());
                    match normalize(admin.cmd(&d)) {
                        // DRYRUN names the user and the command.
                        Reply::Bulk(b) => Reply::Bulk(
                            String::from_utf8_lossy(&b)
                                .replace(&format!("'{user}'"), "'<user>'")
                                .replace(&format!("User {user} "), "User <user> ")
                                .replace("'xs.", "'x")
                                .into_bytes(),
                        ),
                        other => other,
                    }
                };
                let bargs: Vec<Vec<u8>> = args.iter().map(|a| a.clone().into_bytes()).collect();
                let (db, dm) = (dry(&mut admin_b, &ub, &bargs), dry(&mut admin_b, &um, &margs));
                let want = if cat { dry(&mut admin_b, &ur, &margs) } else { db.clone() };
                if dm != want {
                    diffs.push(format!("user [{rules}] ACL DRYRUN {}:\n      expected: {want}\n      module:   {dm}", fmt_cmd(&args)));
                }
                reset(&mut admin_b, false);
                reset(&mut admin_m, true);
                let rb = anon(cb.cmd(&args), &ub);
                let rm = anon(normalize(cm.cmd(&margs)), &um);
                let want = if cat {
                    reset(&mut admin_m, true);
                    anon(normalize(cr.cmd(&margs)), &ur)
                } else {
                    rb.clone()
                };
                let (mut xw, mut xm) = (want.clone(), rm.clone());
                for x in [&mut xw, &mut xm] {
                    mask_times(x);
                    mask_pending(x);
                }
                calls += 1;
                if is_noperm(&rb) {
                    denied += 1;
                }
                if xw != xm {
                    diffs.push(format!(
                        "user [{rules}] {}:\n      {}: {want}\n      module:   {rm}",
                        fmt_cmd(&args),
                        if cat { "expected" } else { "built-in" }
                    ));
                }
                if cat {
                    let _ = db;
                    if is_noperm(&rb) && !is_noperm(&rm) {
                        more.push(fmt_cmd(&margs));
                    } else if !is_noperm(&rb) && is_noperm(&rm) {
                        less.push(fmt_cmd(&margs));
                    }
                }
            }
        }
        if cat {
            platform.push((rules, more, less));
        }
    }
    let mut per_user: std::collections::BTreeMap<String, Vec<&String>> = std::collections::BTreeMap::new();
    for d in &diffs {
        let u = d.split(']').next().unwrap_or("").to_string() + "]";
        per_user.entry(u).or_default().push(d);
    }
    for (u, ds) in &per_user {
        report(&format!("acl: {u}: {} difference(s)", ds.len()));
        for d in ds.iter().take(3) {
            report(&format!("acl:   DIFFERENCE: {}", trunc(d, 400)));
        }
    }
    for (rules, more, less) in &platform {
        let name = |c: &String| {
            let w: Vec<&str> = c.split(' ').collect();
            if w[0] == "XS.GROUP" || w[0] == "XS.INFO" {
                format!("{} {}", w[0], w[1])
            } else {
                w[0].to_string()
            }
        };
        let m: Vec<String> = more.iter().map(name).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let l: Vec<String> = less.iter().map(name).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        report(&format!(
            "acl: NOTE (Redis 7.0: module commands have no ACL category) user [{rules}]: {} call(s) the built-in denies but the module allows{}; {} call(s) the built-in allows but the module denies{}",
            more.len(),
            if m.is_empty() { String::new() } else { format!(" ({})", m.join(", ")) },
            less.len(),
            if l.is_empty() { String::new() } else { format!(" ({})", l.join(", ")) }
        ));
    }
    report(&format!(
        "acl: {} users x {} command shapes: {calls} calls ({denied} denied by the built-in), {} differences{}",
        USERS.len(),
        COMMANDS.len(),
        diffs.len(),
        if module_categories { "" } else { " (category rules compared with the same user without them: 7.0 limitation)" }
    ));
    assert!(diffs.is_empty(), "{} ACL difference(s); first:\n  {}", diffs.len(), diffs[..diffs.len().min(10)].join("\n  "));
}

/// Since 7.2 NOPERM texts name the user (`User b1 has no permissions ...`); the sides use
/// different users.
fn anon(r: Reply, user: &str) -> Reply {
    match r {
        Reply::Error(e) => Reply::Error(e.replace(&format!("User {user} "), "User <user> ")),
        other => other,
    }
}

/// `COMMAND GETKEYSANDFLAGS` and `COMMAND INFO` of every XS.* command against its twin.
#[test]
fn getkeys_match_builtin() {
    let s = Server::start();
    let mut c = s.conn();
    let shapes: &[&str] = &[
        "XADD a * f v",
        "XADD a NOMKSTREAM MAXLEN ~ 10 LIMIT 5 1-1 f v g w",
        "XLEN a",
        "XRANGE a - + COUNT 5",
        "XREVRANGE a + -",
        "XDEL a 1-1 2-2",
        "XTRIM a MINID 5",
        "XSETID a 5-5 ENTRIESADDED 5 MAXDELETEDID 1-1",
        "XINFO STREAM a",
        "XINFO STREAM a FULL COUNT 5",
        "XINFO GROUPS a",
        "XINFO CONSUMERS a g",
        "XINFO HELP",
        "XREAD STREAMS a 0",
        "XREAD COUNT 5 BLOCK 10 STREAMS a b c 0 0 0",
        "XREAD STREAMS STREAMS 0",
        "XREAD COUNT 1 STREAMS a b 0",
        "XREADGROUP GROUP g c STREAMS a >",
        "XREADGROUP GROUP g c COUNT 1 BLOCK 1 NOACK STREAMS a b > 0",
        "XREADGROUP GROUP STREAMS c STREAMS a >",
        "XGROUP CREATE a g $ MKSTREAM ENTRIESREAD 3",
        "XGROUP CREATECONSUMER a g c",
        "XGROUP DELCONSUMER a g c",
        "XGROUP SETID a g 0 ENTRIESREAD 1",
        "XGROUP DESTROY a g",
        "XGROUP HELP",
        "XACK a g 1-1 2-2",
        "XPENDING a g",
        "XPENDING a g IDLE 5 - + 10 c",
        "XCLAIM a g c 0 1-1 2-2 FORCE JUSTID",
        "XAUTOCLAIM a g c 0 0 COUNT 5 JUSTID",
    ];
    let mut diffs = Vec::new();
    for sh in shapes {
        let args: Vec<String> = sh.split(' ').map(|s| s.to_string()).collect();
        let margs = module_args(&args);
        for what in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut a = vec!["COMMAND".to_string(), what.into()];
            a.extend(args.iter().cloned());
            let mut b: Vec<Vec<u8>> = vec![b"COMMAND".to_vec(), what.as_bytes().to_vec()];
            b.extend(margs.iter().cloned());
            let (rb, rm) = (c.cmd(&a), normalize(c.cmd(&b)));
            if rb != rm {
                diffs.push(format!("COMMAND {what} {sh}:\n      built-in: {rb}\n      module:   {rm}"));
            }
        }
    }
    // COMMAND INFO: arity, flags (but `module`), first/last/step, key specs; subcommands too.
    fn norm_info(r: &Reply) -> Vec<String> {
        let v = r.as_array();
        let mut out = Vec::new();
        let name = v[0].text().replace("xs.", "x");
        out.push(format!("name {name}"));
        out.push(format!("arity {}", v[1]));
        let mut flags: Vec<String> = v[2].as_array().iter().map(|f| f.text()).filter(|f| f != "module").collect();
        flags.sort();
        out.push(format!("flags {flags:?}"));
        out.push(format!("first/last/step {} {} {}", v[3], v[4], v[5]));
        if let Some(ks) = v.get(8) {
            // Key specs without their documentation notes.
            let mut ks = ks.clone();
            if let Reply::Array(specs) = &mut ks {
                for sp in specs.iter_mut() {
                    if let Reply::Array(kv) = sp {
                        if kv.len() >= 2 && kv[0] == Reply::Bulk(b"notes".to_vec()) {
                            kv.drain(0..2);
                        }
                    }
                }
            }
            out.push(format!("key specs {ks}"));
        }
        if let Some(Reply::Array(subs)) = v.get(9) {
            // The module's own subcommands (queue policies, issue 16; delayed delivery, issue 17)
            // have no built-in to match.
            let own = [
                "name xgroup|setpolicy",
                "name xgroup|getpolicy",
                "name xgroup|deadletter",
                "name xgroup|redrive",
                "name xgroup|schedule",
                "name xgroup|unschedule",
            ];
            let mut s: Vec<Vec<String>> = subs.iter().map(norm_info).filter(|x| !x.iter().any(|l| own.contains(&l.as_str()))).collect();
            s.sort();
            for x in s {
                out.extend(x.into_iter().map(|l| format!("  {l}")));
            }
        }
        out
    }
    for name in [
        "XADD",
        "XLEN",
        "XRANGE",
        "XREVRANGE",
        "XDEL",
        "XTRIM",
        "XSETID",
        "XINFO",
        "XREAD",
        "XREADGROUP",
        "XGROUP",
        "XACK",
        "XPENDING",
        "XCLAIM",
        "XAUTOCLAIM",
    ] {
        let rb = c.cmd(&["COMMAND", "INFO", name]);
        let rm = c.cmd(&["COMMAND", "INFO", &xcmd(true, name)]);
        let (ib, im) = (norm_info(&rb.as_array()[0]), norm_info(&rm.as_array()[0]));
        // The module has no subcommands the built-in lacks (but its own XS.GROUP SETPOLICY /
        // GETPOLICY / DEADLETTER / REDRIVE / SCHEDULE / UNSCHEDULE, left out above), and vice versa for the ones it implements;
        // compare line by line.
        let sb: std::collections::BTreeSet<&String> = ib.iter().collect();
        let sm: std::collections::BTreeSet<&String> = im.iter().collect();
        let only_b: Vec<&&String> = sb.difference(&sm).collect();
        let only_m: Vec<&&String> = sm.difference(&sb).collect();
        if !only_b.is_empty() || !only_m.is_empty() {
            diffs.push(format!("COMMAND INFO {name}:\n      built-in only: {only_b:?}\n      module only:   {only_m:?}"));
        }
    }
    for d in &diffs {
        report(&format!("getkeys: DIFFERENCE: {d}"));
    }
    report(&format!(
        "getkeys: {} argument shapes (GETKEYS, GETKEYSANDFLAGS) and 15 COMMAND INFO entries compared: {} differences",
        shapes.len(),
        diffs.len()
    ));
    assert!(diffs.is_empty(), "{} difference(s); first:\n  {}", diffs.len(), diffs[..diffs.len().min(10)].join("\n  "));
}

/// `xstream.acl-twin yes`: category rules reach the XS.* commands through their built-in twins
/// (Redis 7.0 gives module commands no category): a `+@all -@write` user is refused XS.ADD with
/// the built-in's NOPERM text for XADD, and still reads; with the config off, XS.ADD passes.
#[test]
fn acl_twin_applies_category_denials() {
    let s = Server::start();
    let mut admin = s.conn();
    assert_eq!(admin.cmd(&["XS.ADD", "k", "1-1", "f", "v"]), Reply::Bulk(b"1-1".to_vec()));
    let r = admin.cmd(&["ACL", "SETUSER", "ro", "reset", "on", ">pw", "~*", "+@all", "-@write"]);
    assert_eq!(r, Reply::Simple("OK".into()));
    let mut ro = s.conn();
    assert_eq!(ro.cmd(&["AUTH", "ro", "pw"]), Reply::Simple("OK".into()));
    // Redis 7.2+ puts XS.* into their twins' categories (SetCommandACLCategories): Redis itself
    // refuses, naming the XS.* command. On 7.0 categories do not reach module commands unless
    // acl-twin is on.
    let info = admin.cmd(&["COMMAND", "INFO", "xs.add"]);
    let native = info.as_array()[0].as_array().get(6).map(|c| !c.as_array().is_empty()).unwrap_or(false);
    let denied = |cmd: &str| {
        Reply::Error(if native {
            format!("NOPERM User ro has no permissions to run the '{cmd}' command")
        } else {
            format!("NOPERM this user has no permissions to run the '{}' command", cmd.replace("xs.", "x"))
        })
    };
    let r = ro.cmd(&["XS.ADD", "k", "2-1", "f", "v"]);
    if native {
        assert_eq!(r, denied("xs.add"));
        assert_eq!(admin.cmd(&["XS.ADD", "k", "2-1", "f", "v"]), Reply::Bulk(b"2-1".to_vec()));
    } else {
        assert_eq!(r, Reply::Bulk(b"2-1".to_vec()));
    }
    assert_eq!(admin.cmd(&["CONFIG", "SET", "xstream.acl-twin", "yes"]), Reply::Simple("OK".into()));
    assert_eq!(ro.cmd(&["XS.ADD", "k", "3-1", "f", "v"]), denied("xs.add"));
    assert_eq!(ro.cmd(&["XS.GROUP", "CREATE", "k", "g", "0"]), denied("xs.group|create"));
    assert_eq!(ro.cmd(&["XS.LEN", "k"]), Reply::Int(2));
    assert_eq!(admin.cmd(&["XS.LEN", "k"]), Reply::Int(2));
}

/// Takeover mode writes the ACL LOG entries the server writes for the stream commands it
/// denies (issue 35): for each user and command shape, the built-in's entries (count, reason,
/// object, username) on a plain server and the module's in takeover mode are the same. The one
/// field the module API decides: `context` reads `module` (RM_ACLAddLogEntry) where the server
/// writes `toplevel`, `multi` or `lua`.
#[test]
fn acl_log_in_takeover_mode() {
    let plain = Server::start_plain();
    let take = Server::builder().module_args(&["takeover", "yes"]).start();
    let users: &[&str] = &[
        "~* +@all -@write",
        "~* +@all -xadd",
        "~s* +@all",
        "%R~* +@all",
        "~* +@all -xgroup|create",
        "~* +@all -@read",
        "~* +@all -@blocking",
        "~* +@all -@slow",
        "~* +@all -@keyspace",
        "~* +@all -@stream",
    ];
    let shapes: &[&[&str]] = &[
        &["XADD", "s", "*", "f", "v"],
        &["XADD", "t", "*", "f", "v"],
        &["XLEN", "s"],
        &["XRANGE", "s", "-", "+"],
        &["XREAD", "STREAMS", "s", "0"],
        &["XREAD", "BLOCK", "10", "STREAMS", "s", "$"],
        &["XGROUP", "CREATE", "s", "g2", "$"],
        &["XINFO", "STREAM", "s"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
        &["XACK", "s", "g", "1-1"],
        &["TYPE", "s"],
        &["SCAN", "0", "TYPE", "stream"],
        &["EVAL", "return redis.call('XADD', KEYS[1], '*', 'f', 'v')", "1", "s"],
        &["EVAL", "return redis.call('XLEN', KEYS[1])", "1", "s"],
    ];
    // Takeover mode checks the twins' permissions always: turning that off is refused.
    let mut admin = take.conn();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "xstream.acl-twin", "no"]),
        Reply::Error(
            "ERR CONFIG SET failed (possibly related to argument 'xstream.acl-twin') - \
             xstream.acl-twin is always on in takeover mode"
                .into()
        )
    );
    assert_eq!(admin.cmd(&["CONFIG", "GET", "xstream.acl-twin"]).as_array()[1], Reply::Bulk(b"yes".to_vec()));
    let mut entries = 0;
    let cases = [false, true].into_iter().flat_map(|resp3| users.iter().enumerate().map(move |u| (resp3, u)));
    for (resp3, (ui, rules)) in cases {
        let mut logs: Vec<Vec<Vec<String>>> = Vec::new();
        for s in [&plain, &take] {
            let mut admin = s.conn();
            admin.cmd(&["FLUSHALL"]);
            admin.cmd(&["XADD", "s", "1-1", "f", "v"]);
            admin.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
            let user = format!("u{ui}");
            let mut a: Vec<String> = ["ACL", "SETUSER", &user, "reset", "on", ">pw"].iter().map(|x| x.to_string()).collect();
            a.extend(rules.split(' ').map(String::from));
            assert_eq!(admin.cmd(&a), Reply::Simple("OK".into()), "{}", fmt_cmd(&a));
            assert_eq!(admin.cmd(&["ACL", "LOG", "RESET"]), Reply::Simple("OK".into()));
            let mut c = s.conn();
            assert_eq!(c.cmd(&["AUTH", &user, "pw"]), Reply::Simple("OK".into()));
            if resp3 {
                c.hello3();
            }
            for shape in shapes {
                c.cmd(shape);
            }
            let log = admin.cmd(&["ACL", "LOG", "100"]);
            let rows: Vec<Vec<String>> = log
                .as_array()
                .iter()
                .map(|e| {
                    let f = |n: &str| e.field(n).map(|v| v.to_string()).unwrap_or_default();
                    vec![f("count"), f("reason"), f("object"), f("username"), f("context")]
                })
                .collect();
            logs.push(rows);
        }
        let (b, m) = (&logs[0], &logs[1]);
        // The log merges entries that agree in every field but the times, context included:
        // the built-in keeps a toplevel and a lua denial of XADD apart, the module's both read
        // `module`. So the counts are summed per (reason, object, username).
        let sum = |rows: &[Vec<String>]| -> std::collections::BTreeMap<Vec<String>, i64> {
            let mut t = std::collections::BTreeMap::new();
            for r in rows {
                let n: i64 = r[0].trim_start_matches("(integer) ").parse().unwrap_or(0);
                *t.entry(r[1..4].to_vec()).or_insert(0) += n;
            }
            t
        };
        assert_eq!(
            sum(m),
            sum(b),
            "RESP{} user [{rules}]: ACL LOG (reason, object, username: count)\nbuilt-in: {b:?}\nmodule:   {m:?}",
            if resp3 { 3 } else { 2 }
        );
        for rm in m {
            // Entries the server itself writes (key denials of the XS.* command, a denied
            // EVAL) keep their context; the module's own say `module`.
            let ours = ["\"x", "\"type", "\"scan"].iter().any(|p| rm[2].starts_with(p));
            assert!(!ours || rm[1].contains("key") || rm[4].contains("module"), "user [{rules}]: {rm:?}");
        }
        entries += b.len();
    }
    assert!(entries >= 40, "the user matrix denied only {entries} calls");
    report(&format!(
        "acl_log_in_takeover_mode: {} users x {} shapes x RESP2/3, {entries} ACL LOG entries equal but context",
        users.len(),
        shapes.len()
    ));
}
