//! The README's reference tables against what the module registers (issue 31): every `XS.*`
//! command the server lists for the module has a row in the command table, every `xstream.*`
//! config a row in the configuration table, and every standard name the takeover filter maps
//! (`NAMES` in src/ffi/takeover.rs) is named in the takeover section, and every field of
//! `INFO xstream` in the INFO table. A command, config, mapping or field added without its
//! README line fails here, and so does a test file the list of docs/TESTING.md does not name.

mod common;

use common::*;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

/// The README's section `## title` (up to the next `## `).
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let start = text.find(&format!("\n## {title}")).unwrap_or_else(|| panic!("README has no section '{title}'"));
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

#[test]
fn readme_tables_cover_commands_configs_and_takeover_names() {
    let s = Server::start();
    let mut c = s.conn();
    let text = readme();
    let mut missing = Vec::new();

    let commands = section(&text, "Commands");
    let listed = c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "xstream"]);
    let mut names: Vec<String> = listed.as_array().iter().map(|r| r.text().to_uppercase()).collect();
    names.sort();
    assert!(names.len() >= 20, "COMMAND LIST FILTERBY MODULE xstream: {listed}");
    let row = |cmd: &str| commands.lines().find(|l| l.starts_with(&format!("| `{cmd}` |"))).map(str::to_string);
    for n in &names {
        match n.split_once('|') {
            // A subcommand: named in its command's row.
            Some((parent, sub)) => {
                if !row(parent).is_some_and(|r| r.contains(sub)) {
                    missing.push(format!("subcommand {n}: not named in the {parent} row of the README's command table"));
                }
            }
            None if row(n).is_none() => missing.push(format!("command {n}: no row in the README's command table")),
            None => {}
        }
    }

    let config = section(&text, "Configuration");
    let got = c.cmd(&["CONFIG", "GET", "xstream.*"]);
    let mut configs: Vec<String> = match &got {
        Reply::Map(kv) => kv.iter().map(|(k, _)| k.text()).collect(),
        other => other.as_array().chunks(2).map(|p| p[0].text()).collect(),
    };
    configs.sort();
    assert!(configs.len() >= 10, "CONFIG GET xstream.*: {got}");
    for name in &configs {
        if !config.contains(&format!("`{name}`")) {
            missing.push(format!("config {name}: no row in the README's configuration table"));
        }
    }

    let takeover = section(&text, "Serving the standard names (takeover)");
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/ffi/takeover.rs")).expect("takeover.rs");
    let map: Vec<(String, String)> = source
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("(c\"")?;
            let (std_name, rest) = rest.split_once("\", c\"")?;
            let (ours, _) = rest.split_once('"')?;
            Some((std_name.to_string(), ours.to_string()))
        })
        .collect();
    assert!(map.len() >= 20, "the filter's map in src/ffi/takeover.rs: {map:?}");
    for (std_name, ours) in &map {
        if !names.contains(ours) {
            missing.push(format!("takeover maps {std_name} to {ours}, which the module does not register"));
        }
        if std_name.starts_with('X') && !takeover.contains(&format!("`{std_name}`")) {
            missing.push(format!("takeover maps {std_name}: not named in the README's takeover section"));
        }
    }
    let info = section(&text, "INFO xstream");
    let got = c.cmd(&["INFO", "xstream"]);
    let fields: Vec<String> =
        got.text().lines().filter_map(|l| l.split_once(':').map(|(k, _)| k.strip_prefix("xstream_").unwrap_or(k).to_string())).collect();
    assert!(fields.len() >= 25, "INFO xstream: {got}");
    for f in &fields {
        if !info.contains(&format!("`{f}`")) {
            missing.push(format!("INFO field {f}: not named in the README's INFO xstream table"));
        }
    }
    let testing = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/TESTING.md")).expect("docs/TESTING.md");
    let mut test_files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
        .expect("tests/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    test_files.sort();
    assert!(test_files.len() >= 30, "tests/*.rs: {test_files:?}");
    for f in &test_files {
        if !testing.contains(&format!("`{f}`")) && !testing.contains(&format!("tests/{f}")) {
            missing.push(format!("test file tests/{f}: not named in docs/TESTING.md's list"));
        }
    }
    assert!(missing.is_empty(), "README out of date:\n  {}", missing.join("\n  "));
    report(&format!(
        "readme_tables: {} commands, {} configs, {} takeover names, {} INFO fields in the README, {} test files in docs/TESTING.md",
        names.len(),
        configs.len(),
        map.len(),
        fields.len(),
        test_files.len()
    ));
}
