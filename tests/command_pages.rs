//! The examples of docs/commands/*.md stay true: every fenced block whose info string starts
//! with `redis-cli` is run, command by command, with the host's own `redis-cli --no-raw`
//! against a server with the module, and its output must be the one the page shows, line for
//! line. Each block starts on an empty database (FLUSHALL first).
//!
//! Block format (what a user sees in an interactive redis-cli session):
//!
//! ```text
//! redis> XS.ADD s 1-0 name ada
//! "1-0"
//! ```
//!
//! Arguments are split on spaces; double quotes group one argument (`"a b"`), as redis-cli
//! itself does. In an expected line, `<int>` stands for any integer and `<id>` for any entry
//! ID, for the few values that depend on the clock (idle times, `*` IDs).
//!
//! A block marked `redis-cli twin` is also run with the built-in twin of each command
//! (`XS.ADD` -> `XADD`, ...) on the same server in another database, and both outputs must be
//! identical: the pages claim "no difference from the built-in" for those examples, and this
//! checks the claim on the host the tests run on. Twin blocks whose commands the host lacks
//! (the 8.x commands on 7.x hosts) are skipped for the twin run only.
//!
//! Also checked: every XS.* command the module registers has a page, and the index lists every
//! page.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Block {
    page: String,
    line: usize,
    twin: bool,
    steps: Vec<(String, Vec<String>)>,
}

fn split_args(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut any = false;
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '"' => {
                in_quotes = !in_quotes;
                any = true;
            }
            '\\' if in_quotes => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ' ' if !in_quotes => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn pages_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands")
}

fn parse_pages() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(pages_dir())
        .expect("docs/commands")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read page");
        let page = f.file_name().unwrap().to_string_lossy().into_owned();
        let mut cur: Option<Block> = None;
        for (i, l) in text.lines().enumerate() {
            match &mut cur {
                None => {
                    if let Some(info) = l.strip_prefix("```redis-cli") {
                        cur = Some(Block { page: page.clone(), line: i + 1, twin: info.trim() == "twin", steps: Vec::new() });
                    }
                }
                Some(b) => {
                    if l.starts_with("```") {
                        blocks.push(cur.take().unwrap());
                    } else if let Some(cmd) = l.strip_prefix("redis> ") {
                        b.steps.push((cmd.to_string(), Vec::new()));
                    } else if let Some(last) = b.steps.last_mut() {
                        last.1.push(l.to_string());
                    } else {
                        panic!("{}:{}: output before the first command", page, i + 1);
                    }
                }
            }
        }
        assert!(cur.is_none(), "{page}: unterminated example block");
    }
    blocks
}

fn cli(port: u16, db: u32, args: &[String]) -> Vec<String> {
    let out = Command::new(redis_tool_bin("redis-cli"))
        .args(["--no-raw", "-p", &port.to_string(), "-n", &db.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s.lines().map(|l| l.trim_end().to_string()).collect()
}

/// `expected` with `<int>` / `<id>` placeholders against an actual line.
fn line_matches(expected: &str, actual: &str) -> bool {
    fn go(e: &str, a: &str) -> bool {
        if let Some(rest) = e.strip_prefix("<int>") {
            let a2 = a.strip_prefix('-').unwrap_or(a);
            let n = a2.bytes().take_while(u8::is_ascii_digit).count();
            return n > 0 && go(rest, &a2[n..]);
        }
        if let Some(rest) = e.strip_prefix("<id>") {
            let n1 = a.bytes().take_while(u8::is_ascii_digit).count();
            let Some(a2) = a[n1..].strip_prefix('-') else { return false };
            let n2 = a2.bytes().take_while(u8::is_ascii_digit).count();
            return n1 > 0 && n2 > 0 && go(rest, &a2[n2..]);
        }
        match (e.chars().next(), a.chars().next()) {
            (None, None) => true,
            (Some(x), Some(y)) if x == y => go(&e[x.len_utf8()..], &a[y.len_utf8()..]),
            _ => false,
        }
    }
    go(expected, actual)
}

/// `XS.ADD` -> `XADD`, `XS.INFO` -> `XINFO`; other words unchanged.
fn twin_args(args: &[String]) -> Vec<String> {
    let mut v = args.to_vec();
    if let Some(first) = v.first_mut() {
        if first.len() > 3 && first[..3].eq_ignore_ascii_case("xs.") {
            *first = format!("X{}", &first[3..]);
        }
    }
    v
}

#[test]
fn command_page_examples_are_true() {
    let blocks = parse_pages();
    assert!(blocks.len() >= 20, "only {} example blocks found", blocks.len());
    let s = Server::start();
    let mut c = s.conn();
    // The pages show what the reference host (Debian's 7.0.15) answers; some texts are the
    // host release's own (docs/hosts.md). On another host only the twin comparisons run.
    let info = c.cmd(&["INFO", "server"]).text();
    let reference = info.lines().any(|l| l.starts_with("redis_version:7.0."));
    let mut problems = Vec::new();
    let mut twin_runs = 0;
    for b in &blocks {
        c.cmd(&["FLUSHALL"]);
        let mut ours_all = Vec::new();
        for (cmd, expected) in &b.steps {
            let args = split_args(cmd);
            let actual = cli(s.port(), 0, &args);
            let ok = !reference || actual.len() == expected.len() && expected.iter().zip(&actual).all(|(e, a)| line_matches(e, a));
            if !ok {
                problems.push(format!(
                    "{}:{}: redis> {cmd}\n  page:\n    {}\n  server:\n    {}",
                    b.page,
                    b.line,
                    expected.join("\n    "),
                    actual.join("\n    ")
                ));
            }
            ours_all.push(actual);
        }
        if b.twin {
            // The twin run needs every twin command on this host.
            let known = b.steps.iter().all(|(cmd, _)| {
                let t = twin_args(&split_args(cmd));
                let r = c.cmd(&["COMMAND", "INFO", &t[0]]);
                r.as_array().first().is_some_and(|x| !x.is_nil())
            });
            if !known {
                continue;
            }
            twin_runs += 1;
            for ((cmd, expected), ours) in b.steps.iter().zip(&ours_all) {
                let t = twin_args(&split_args(cmd));
                let theirs = cli(s.port(), 1, &t);
                // Errors name the command they came from (`'xs.add'` vs `'xadd'`).
                let norm = |l: &String| l.replace("'xs.", "'x").replace("'XS.", "'X");
                // A line the page shows with a placeholder (an idle time) only has to match it.
                let same = ours.len() == theirs.len()
                    && ours.iter().zip(&theirs).enumerate().all(|(i, (a, b))| match expected.get(i) {
                        Some(e) if e.contains("<int>") || e.contains("<id>") => line_matches(e, a) && line_matches(e, b),
                        _ => norm(a) == norm(b),
                    });
                if !same {
                    problems.push(format!(
                        "{}:{}: twin differs for `{cmd}`:\n  module:   {}\n  built-in: {}",
                        b.page,
                        b.line,
                        ours.join(" | "),
                        theirs.join(" | ")
                    ));
                }
            }
        }
    }
    report(&format!(
        "{} example blocks{}, {} also run against the built-in",
        blocks.len(),
        if reference { "" } else { " (not the reference host: outputs not compared)" },
        twin_runs
    ));
    assert!(problems.is_empty(), "{} example(s) differ:\n{}", problems.len(), problems.join("\n\n"));
}

#[test]
fn every_command_has_a_page_and_the_index_lists_it() {
    let s = Server::start();
    let mut c = s.conn();
    let list = c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "xstream"]);
    let index = std::fs::read_to_string(pages_dir().join("README.md")).expect("docs/commands/README.md");
    let mut missing = Vec::new();
    for name in list.as_array().iter().map(|r| r.text()) {
        // Subcommands live on their container's page; test hooks are not user commands.
        if name.contains('|') || name.starts_with("xs.debug-") {
            continue;
        }
        let file = format!("{}.md", name.replace('.', "-"));
        if !pages_dir().join(&file).exists() {
            missing.push(format!("no page {file} for {name}"));
        } else if !index.contains(&format!("({file})")) {
            missing.push(format!("README.md does not link {file}"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
