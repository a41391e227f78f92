//! COMMAND DOCS of the XS.* commands against their built-in twins on the same server
//! (src/ffi/docs.rs): the summary, the complexity and the whole argument tree must be the
//! twin's, argument by argument; `since` is the module's version and `group` is `module`.
//! Subcommands (XS.GROUP CREATE ..., XS.INFO STREAM ...) are compared with the twin's.
//! Runs on every host of the matrix: each host documents its own built-in commands.

mod common;

use common::*;

fn field<'a>(doc: &'a Reply, name: &str) -> Option<&'a Reply> {
    let items = doc.as_array();
    items
        .chunks(2)
        .find(|p| p.first().map(|k| k.text()) == Some(name.to_string()))
        .and_then(|p| p.get(1))
}

/// COMMAND DOCS <name>: the docs map of that one command (None if the server has none).
fn docs(c: &mut Conn, name: &str) -> Option<Reply> {
    let r = c.cmd(&["COMMAND", "DOCS", name]);
    let items = r.as_array();
    (items.len() == 2).then(|| items[1].clone())
}

fn compare(what: &str, ours: &Reply, twin: &Reply, problems: &mut Vec<String>) {
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
