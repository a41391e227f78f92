//! COMMAND DOCS of the XS.* commands against their built-in twins on the same server
//! (src/ffi/docs.rs): the summary, the complexity and the whole argument tree must be the
//! twin's, argument by argument; `since` is the module's version and `group` is `module`.
//! Subcommands (XS.GROUP CREATE ..., XS.INFO STREAM ...) are compared with the twin's.
//! Runs on every host of the matrix: each host documents its own built-in commands.

mod common;

use common::*;

fn field<'a>(doc: &'a Reply, name: &str) -> Option<&'a Reply> {
    let items = doc.as_array();
    items.chunks(2).find(|p| p.first().map(|k| k.text()) == Some(name.to_string())).and_then(|p| p.get(1))
}

/// COMMAND DOCS <name>: the docs map of that one command (None if the server has none).
fn docs(c: &mut Conn, name: &str) -> Option<Reply> {
    let r = c.cmd(&["COMMAND", "DOCS", name]);
    let items = r.as_array();
    (items.len() == 2).then(|| items[1].clone())
}

/// The tokens of an argument tree (COMMAND DOCS `arguments`), at any depth.
fn tokens(args: &Reply) -> Vec<String> {
    let mut out = Vec::new();
    for a in args.as_array() {
        if let Some(t) = field(a, "token") {
            out.push(t.text().to_ascii_uppercase());
        }
        if let Some(sub) = field(a, "arguments") {
            out.extend(tokens(sub));
        }
    }
    out
}

/// The options the module documents beyond an older twin (src/ffi/docs.rs, `extend_twin_doc`):
/// MAXCOUNT / MAXSIZE (8.10) and the KEEPREF / DELREF / ACKED policy (8.2). Removed from our tree
/// when the twin does not have them, after checking they are there; the rest must be the twin's.
fn without_our_extras(what: &str, ours: &Reply, twin: &Reply, problems: &mut Vec<String>) -> Reply {
    let (Some(our_args), Some(their_args)) = (field(ours, "arguments"), field(twin, "arguments")) else {
        return ours.clone();
    };
    let theirs = tokens(their_args);
    let extras: &[&str] = match what {
        "xs.read" => &["MAXCOUNT", "MAXSIZE"],
        "xs.readgroup" => &["MAXCOUNT", "MAXSIZE", "CLAIM"],
        "xs.add" => &["KEEPREF", "IDMP", "IDMPAUTO", "MAXAGE", "NOTBEFORE", "DELAY"],
        "xs.trim" => &["KEEPREF", "MAXAGE"],
        "xs.cfgset" => &["MAXAGE"],
        _ => &[],
    };
    let missing: Vec<&str> = extras.iter().copied().filter(|x| !theirs.iter().any(|t| t == x)).collect();
    if missing.is_empty() {
        return ours.clone();
    }
    let mine = tokens(our_args);
    for m in &missing {
        if !mine.iter().any(|t| t == m) {
            problems.push(format!("{what}: the module's option {m} is not documented"));
        }
    }
    // MAXAGE (ours, issue 17) is a strategy inside the `trim` block of XS.ADD / XS.TRIM: only
    // that token goes, the block stays to be compared.
    let our_args = &if missing.contains(&"MAXAGE") && what != "xs.cfgset" { without_token(our_args, "MAXAGE") } else { our_args.clone() };
    let missing: Vec<&str> = if what == "xs.cfgset" { missing } else { missing.into_iter().filter(|m| *m != "MAXAGE").collect() };
    let drop = |a: &Reply| {
        let tok = field(a, "token").map(|t| t.text().to_ascii_uppercase());
        let sub = field(a, "arguments").map(tokens).unwrap_or_default();
        missing.iter().any(|m| tok.as_deref() == Some(*m) || sub.iter().any(|t| t == m))
    };
    let kept: Vec<Reply> = our_args.as_array().iter().filter(|a| !drop(a)).cloned().collect();
    let mut out = ours.clone();
    out.set_field("arguments", Reply::Array(kept));
    out
}

/// An argument tree without the arguments whose token is `token` (at any depth).
fn without_token(args: &Reply, token: &str) -> Reply {
    let kept = args
        .as_array()
        .iter()
        .filter(|a| field(a, "token").map(|t| t.text().to_ascii_uppercase()) != Some(token.to_string()))
        .map(|a| match field(a, "arguments") {
            Some(sub) => {
                let mut a = a.clone();
                a.set_field("arguments", without_token(sub, token));
                a
            }
            None => a.clone(),
        })
        .collect();
    Reply::Array(kept)
}

fn compare(what: &str, ours: &Reply, twin: &Reply, problems: &mut Vec<String>) {
    let ours = &without_our_extras(what, ours, twin, problems);
    for f in ["summary", "complexity", "arguments"] {
        if field(ours, f) != field(twin, f) {
            problems.push(format!(
                "{what}: {f} differs:\n  ours: {}\n  twin: {}",
                trunc(&format!("{:?}", field(ours, f)), 600),
                trunc(&format!("{:?}", field(twin, f)), 600)
            ));
        }
    }
    if field(ours, "since").map(|v| v.text()) != Some("0.1.0".into()) {
        problems.push(format!("{what}: since {:?}", field(ours, "since")));
    }
    if field(ours, "group").map(|v| v.text()) != Some("module".into()) {
        problems.push(format!("{what}: group {:?}", field(ours, "group")));
    }
}

/// Subcommands no twin has (XS.GROUP SETPOLICY / GETPOLICY / DEADLETTER): the module's own trees.
const OWN_SUBCOMMANDS: &[&str] =
    &["xs.group|setpolicy", "xs.group|getpolicy", "xs.group|deadletter", "xs.group|redrive", "xs.group|schedule", "xs.group|unschedule"];

#[test]
fn command_docs_match_the_twins() {
    let s = Server::start();
    let mut c = s.conn();
    let list = c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "xstream"]);
    let mut names: Vec<String> = list.as_array().iter().map(|r| r.text()).filter(|n| !n.contains('|')).collect();
    names.sort();
    let mut problems = Vec::new();
    let mut compared = 0;
    for name in &names {
        let rest = &name["xs.".len()..];
        if rest.contains('-') {
            continue;
        }
        let twin = format!("x{rest}");
        let (Some(ours), Some(theirs)) = (docs(&mut c, name), docs(&mut c, &twin)) else {
            continue;
        };
        if field(&theirs, "arguments").is_some() || field(&theirs, "subcommands").is_none() {
            compare(name, &ours, &theirs, &mut problems);
            compared += 1;
        }
        // Containers: every subcommand of ours against the twin's.
        if let (Some(our_subs), Some(their_subs)) = (field(&ours, "subcommands"), field(&theirs, "subcommands")) {
            for p in our_subs.as_array().chunks(2) {
                let sub = p[0].text();
                let twin_sub = format!("x{}", &sub["xs.".len()..]);
                let theirs = their_subs.as_array().chunks(2).find(|q| q[0].text() == twin_sub).map(|q| q[1].clone());
                match theirs {
                    Some(t) => {
                        compare(&sub, &p[1], &t, &mut problems);
                        compared += 1;
                    }
                    // The module's own subcommands (queue policies, issue 16): checked below.
                    None if OWN_SUBCOMMANDS.contains(&sub.as_str()) => {}
                    None => problems.push(format!("{sub}: the twin has no {twin_sub}")),
                }
            }
        }
    }
    // XS.ADD, RANGE, REVRANGE, LEN, DEL, TRIM, READ, READGROUP, ACK, PENDING, CLAIM, AUTOCLAIM,
    // SETID, six XGROUP and four XINFO subcommands at least.
    assert!(compared >= 20, "only {compared} commands compared: {names:?}");
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
    report(&format!("command_docs: {compared} XS.* commands and subcommands documented as their twins"));
    assert!(!s.log_contains("Invalid command info"), "log:\n{}", s.log_tail(20));
}

/// Commands no twin on this host documents carry the module's own tree: XS.TYPE, XS.SCAN,
/// XS.IMPORT, XS.EXPORT always; XS.DELEX / XS.ACKDEL on hosts before 8.2 (on 8.2+ the twin's, which
/// the test above compares).
#[test]
fn command_docs_of_the_module_own_commands() {
    let s = Server::start();
    let mut c = s.conn();
    let names_of = |args: &Reply| -> Vec<String> { args.as_array().iter().filter_map(|a| field(a, "name").map(|n| n.text())).collect() };
    let mut expect: Vec<(&str, &[&str])> = vec![
        ("xs.type", &["key"]),
        ("xs.scan", &["cursor", "pattern", "count", "type"]),
        ("xs.import", &["key"]),
        ("xs.export", &["key", "droppolicies"]),
        ("xs.compact", &["key", "nodes"]),
    ];
    if docs(&mut c, "xcfgset").is_none() {
        expect.push(("xs.cfgset", &["key", "duration", "maxsize", "maxage"]));
        expect.push(("xs.idmprecord", &["key", "pid", "iid", "stream-id"]));
    }
    expect.push(("xs.idmpexpire", &["key", "now-ms", "work", "pid"]));
    if docs(&mut c, "xnack").is_none() {
        expect.push(("xs.nack", &["key", "group", "mode", "ids", "count", "force"]));
    }
    if docs(&mut c, "xdelex").is_none() {
        expect.push(("xs.delex", &["key", "condition", "ids"]));
        expect.push(("xs.ackdel", &["key", "group", "condition", "ids"]));
    }
    expect.push(("xs.group|setpolicy", &["key", "group", "max-deliveries", "ack-timeout", "ttl-ms", "reset"]));
    expect.push(("xs.group|getpolicy", &["key", "group"]));
    expect.push(("xs.group|deadletter", &["key", "group", "id"]));
    expect.push(("xs.group|redrive", &["dlq-key", "source-key", "count"]));
    // Delayed delivery (issue 17).
    expect.push(("xs.group|schedule", &["key", "group", "id"]));
    expect.push(("xs.group|unschedule", &["key", "group", "id"]));
    for (name, args) in expect {
        let d = docs(&mut c, name).unwrap_or_else(|| panic!("no COMMAND DOCS for {name}"));
        assert!(field(&d, "summary").is_some_and(|s| !s.text().is_empty()), "{name}: no summary: {d:?}");
        assert!(field(&d, "complexity").is_some(), "{name}: no complexity");
        assert_eq!(field(&d, "group").map(|g| g.text()), Some("module".into()), "{name}");
        let got = names_of(field(&d, "arguments").unwrap_or_else(|| panic!("{name}: no arguments")));
        assert_eq!(got, args, "{name}: argument names");
    }
    // XS.CFGSET (ours or the twin's, extended): MAXAGE ms [EXACT]; XS.ADD / XS.TRIM: MAXAGE among
    // the trimming strategies.
    let d = docs(&mut c, "xs.cfgset").unwrap();
    let t = tokens(field(&d, "arguments").unwrap());
    assert!(t.ends_with(&["MAXAGE".to_string(), "EXACT".to_string()]), "{t:?}");
    for name in ["xs.add", "xs.trim"] {
        let d = docs(&mut c, name).unwrap();
        let t = tokens(field(&d, "arguments").unwrap());
        let at = t.iter().position(|x| x == "MINID").unwrap_or_else(|| panic!("{name}: {t:?}"));
        assert_eq!(t.get(at + 1).map(String::as_str), Some("MAXAGE"), "{name}: {t:?}");
    }
    // XS.ADD: NOTBEFORE | DELAY, one block before the trimming options.
    let d = docs(&mut c, "xs.add").unwrap();
    let t = tokens(field(&d, "arguments").unwrap());
    let at = t.iter().position(|x| x == "NOTBEFORE").unwrap_or_else(|| panic!("xs.add: {t:?}"));
    assert_eq!(t.get(at + 1).map(String::as_str), Some("DELAY"), "{t:?}");
    assert!(t.iter().position(|x| x == "MAXLEN").is_some_and(|m| m > at), "{t:?}");
    // SETPOLICY: every token, and the dead-letter key with the second key spec.
    let d = docs(&mut c, "xs.group|setpolicy").unwrap();
    let args = field(&d, "arguments").unwrap();
    assert_eq!(tokens(args), ["MAXDELIVERIES", "DEADLETTER", "DROP", "ACKTIMEOUT", "BACKOFF", "MAXBACKOFF", "CONSUMERTTL", "RESET"], "{d:?}");
    let info = c.cmd(&["COMMAND", "INFO", "xs.group|setpolicy"]).to_string();
    assert!(info.contains("\"DEADLETTER\""), "the dead-letter key spec: {info}");
    // The policy block and the IDS block of XS.DELEX, in full.
    if docs(&mut c, "xdelex").is_none() {
        let d = docs(&mut c, "xs.delex").unwrap();
        let args = field(&d, "arguments").unwrap();
        assert_eq!(tokens(args), ["KEEPREF", "DELREF", "ACKED", "IDS"], "{d:?}");
    }
    assert!(!s.log_contains("Invalid command info"), "log:\n{}", s.log_tail(20));
}
