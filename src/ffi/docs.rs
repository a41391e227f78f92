//! COMMAND DOCS for the XS.* commands.
//!
//! An XS.* command takes the syntax of its built-in twin (XS.ADD is XADD's), so its
//! documentation is the twin's as this very server documents it: at load, `COMMAND DOCS
//! <twin>` gives the summary, the complexity and the argument tree (types, tokens,
//! optional / multiple flags, one-of and block groups), and SetCommandInfo installs them on
//! the XS.* command with `since` set to this module's version. redis-cli hints and client
//! code generators then see the same tree as for the twin, on every host (a 7.0 server
//! documents 7.0's XADD, a 7.4 server 7.4's), plus the options the module accepts beyond an
//! older twin (`extend_twin_doc`). Commands without a twin on the host (XS.IMPORT, XS.TYPE,
//! XS.DELEX on 7.x, ...) get the module's own tree (`own_doc`). tests/command_docs.rs compares
//! the trees; tests/cli_hints.py checks redis-cli 7.2's hints built from them.

use redis_module::{raw, Context, RedisValue};
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr;

/// One argument of a command's documentation, as COMMAND DOCS gives it.
#[derive(Debug, Default, Clone)]
pub struct ArgDoc {
    name: String,
    typ: String,
    key_spec_index: Option<i64>,
    token: Option<String>,
    summary: Option<String>,
    since: Option<String>,
    deprecated_since: Option<String>,
    display_text: Option<String>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    args: Vec<ArgDoc>,
}

/// A command's documentation (the fields we carry over).
#[derive(Debug, Default, Clone)]
pub struct Doc {
    summary: Option<String>,
    complexity: Option<String>,
    args: Vec<ArgDoc>,
    /// Subcommands by full lower-case name (`xgroup|create`).
    subcommands: Vec<(String, Doc)>,
}

impl Doc {
    /// The documentation of subcommand `sub` (e.g. `create`) of this container.
    pub fn subcommand(&self, container: &str, sub: &str) -> Option<&Doc> {
        let full = format!("{}|{}", container.to_ascii_lowercase(), sub.to_ascii_lowercase());
        self.subcommands.iter().find(|(n, _)| *n == full).map(|(_, d)| d)
    }
}

/// The built-in twin of an XS.* command name (`XS.ADD` -> `XADD`).
pub fn twin_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix("XS.").or_else(|| name.strip_prefix("xs."))?;
    if rest.contains('-') {
        return None;
    }
    Some(format!("X{rest}"))
}

/// `COMMAND DOCS <twin>` on this server, parsed; None when the server has no such command
/// (or no COMMAND DOCS).
pub fn twin_docs(ctx: &Context, twin: &str) -> Option<Doc> {
    let reply = ctx.call("COMMAND", &["DOCS", twin]).ok()?;
    let items = as_array(&reply)?;
    // [name, docs] pairs; exactly one for one name.
    let docs = items.get(1)?;
    parse_doc(docs)
}

fn text(v: &RedisValue) -> Option<String> {
    match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.clone()),
        RedisValue::SimpleStringStatic(s) => Some((*s).to_string()),
        RedisValue::BulkRedisString(s) => Some(s.to_string_lossy()),
        RedisValue::StringBuffer(b) => Some(String::from_utf8_lossy(b).into_owned()),
        RedisValue::Integer(i) => Some(i.to_string()),
        _ => None,
    }
}

fn as_array(v: &RedisValue) -> Option<&[RedisValue]> {
    match v {
        RedisValue::Array(a) => Some(a),
        _ => None,
    }
}

/// A map as RESP2 sends it (a flat array of name, value).
fn pairs(v: &RedisValue) -> Vec<(String, &RedisValue)> {
    let Some(a) = as_array(v) else { return Vec::new() };
    a.chunks(2).filter_map(|p| Some((text(p.first()?)?, p.get(1)?))).collect()
}

fn parse_doc(v: &RedisValue) -> Option<Doc> {
    let mut d = Doc::default();
    for (k, val) in pairs(v) {
        match k.as_str() {
            "summary" => d.summary = text(val),
            "complexity" => d.complexity = text(val),
            "arguments" => d.args = as_array(val)?.iter().filter_map(parse_arg).collect(),
            "subcommands" => {
                for (name, sub) in pairs(val) {
                    d.subcommands.push((name.to_ascii_lowercase(), parse_doc(sub)?));
                }
            }
            _ => {}
        }
    }
    Some(d)
}

fn parse_arg(v: &RedisValue) -> Option<ArgDoc> {
    let mut a = ArgDoc::default();
    for (k, val) in pairs(v) {
        match k.as_str() {
            "name" => a.name = text(val)?,
            "type" => a.typ = text(val)?,
            "key_spec_index" => a.key_spec_index = text(val).and_then(|t| t.parse().ok()),
            "token" => a.token = text(val),
            "summary" => a.summary = text(val),
            "since" => a.since = text(val),
            "deprecated_since" => a.deprecated_since = text(val),
            "display_text" => a.display_text = text(val),
            "flags" => {
                for f in as_array(val).unwrap_or(&[]).iter().filter_map(text) {
                    match f.as_str() {
                        "optional" => a.optional = true,
                        "multiple" => a.multiple = true,
                        "multiple_token" => a.multiple_token = true,
                        _ => {}
                    }
                }
            }
            "arguments" => a.args = as_array(val)?.iter().filter_map(parse_arg).collect(),
            _ => {}
        }
    }
    (!a.name.is_empty()).then_some(a)
}

/// The C structures SetCommandInfo reads, with the strings and arrays they point into
/// (Redis copies everything it keeps; this lives until the call returns).
#[derive(Default)]
pub struct CDocs {
    strings: Vec<CString>,
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
    pub summary: Option<*const c_char>,
    pub complexity: Option<*const c_char>,
    pub args: Option<*mut raw::RedisModuleCommandArg>,
}

impl CDocs {
    fn s(&mut self, t: &str) -> *const c_char {
        // An interior NUL cannot come from COMMAND DOCS; drop what follows it if it did.
        let c = CString::new(t.split('\0').next().unwrap_or("")).unwrap_or_default();
        let p = c.as_ptr();
        self.strings.push(c);
        p
    }

    fn opt(&mut self, t: &Option<String>) -> *const c_char {
        match t {
            Some(t) => self.s(t),
            None => ptr::null(),
        }
    }

    /// A NULL-name-terminated array of `args`; None when the argument tree has a type
    /// this module API does not know (the command then keeps no argument docs).
    fn args(&mut self, args: &[ArgDoc], key_specs: usize) -> Option<*mut raw::RedisModuleCommandArg> {
        let mut out = Vec::with_capacity(args.len() + 1);
        for a in args {
            let typ = match a.typ.as_str() {
                "string" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                "integer" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                "double" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                "key" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                "pattern" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PATTERN,
                "unix-time" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
                "pure-token" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                "oneof" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                "block" => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                _ => return None,
            };
            let key_spec_index = match (typ == raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY, a.key_spec_index) {
                // Our commands have at most one key spec, which covers the twin's keys.
                (true, Some(i)) if (i as usize) < key_specs.max(1) => i as c_int,
                (true, _) => 0,
                (false, _) => -1,
            };
            let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            if a.multiple_token {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE_TOKEN;
            }
            let subargs = if a.args.is_empty() { ptr::null_mut() } else { self.args(&a.args, key_specs)? };
            out.push(raw::RedisModuleCommandArg {
                name: self.s(&a.name),
                type_: typ,
                key_spec_index,
                token: self.opt(&a.token),
                summary: self.opt(&a.summary),
                since: self.opt(&a.since),
                flags: flags as c_int,
                deprecated_since: self.opt(&a.deprecated_since),
                subargs,
                display_text: self.opt(&a.display_text),
            });
        }
        // SAFETY: all-zero is this plain C struct's terminator (name NULL).
        out.push(unsafe { std::mem::zeroed() });
        let p = out.as_mut_ptr();
        // The Vec's buffer does not move when the Vec itself is moved into `arrays`.
        self.arrays.push(out);
        Some(p)
    }

    /// The C form of `d` for a command with `key_specs` key specs.
    pub fn build(d: &Doc, key_specs: usize) -> CDocs {
        let mut c = CDocs::default();
        c.summary = d.summary.as_ref().map(|t| c.s(t));
        c.complexity = d.complexity.as_ref().map(|t| c.s(t));
        if !d.args.is_empty() {
            c.args = c.args(&d.args, key_specs);
        }
        c
    }
}

// ---- the module's own documentation -------------------------------------------------------
//
// For what no twin on this host documents: commands without a built-in twin (XS.TYPE,
// XS.SCAN, XS.IMPORT, XS.EXPORT), commands whose twin is newer than the host (XS.DELEX /
// XS.ACKDEL before 8.2), and options the module adds to an older twin's syntax (MAXCOUNT /
// MAXSIZE of 8.10 on XS.READ / XS.READGROUP, the 8.2 reference policy on XS.ADD / XS.TRIM).
// The trees follow the upstream JSON files of the commands (src/commands/*.json) where they
// exist. tests/command_docs.rs checks them.

impl ArgDoc {
    fn new(name: &str, typ: &str) -> ArgDoc {
        ArgDoc { name: name.into(), typ: typ.into(), ..ArgDoc::default() }
    }
    fn key(name: &str) -> ArgDoc {
        ArgDoc { key_spec_index: Some(0), ..ArgDoc::new(name, "key") }
    }
    fn string(name: &str) -> ArgDoc {
        ArgDoc::new(name, "string")
    }
    fn integer(name: &str) -> ArgDoc {
        ArgDoc::new(name, "integer")
    }
    fn pure(token: &str) -> ArgDoc {
        ArgDoc { token: Some(token.into()), ..ArgDoc::new(&token.to_ascii_lowercase(), "pure-token") }
    }
    fn group(name: &str, typ: &str, args: Vec<ArgDoc>) -> ArgDoc {
        ArgDoc { args, ..ArgDoc::new(name, typ) }
    }
    fn token(mut self, t: &str) -> ArgDoc {
        self.token = Some(t.into());
        self
    }
    fn optional(mut self) -> ArgDoc {
        self.optional = true;
        self
    }
    fn multiple(mut self) -> ArgDoc {
        self.multiple = true;
        self
    }
    fn since(mut self, v: &str) -> ArgDoc {
        self.since = Some(v.into());
        self
    }
}

fn doc(summary: &str, complexity: &str, args: Vec<ArgDoc>) -> Doc {
    Doc { summary: Some(summary.into()), complexity: Some(complexity.into()), args, subcommands: Vec::new() }
}

/// `[KEEPREF | DELREF | ACKED]` (Redis 8.2).
fn policy() -> ArgDoc {
    ArgDoc::group("condition", "oneof", vec![ArgDoc::pure("KEEPREF"), ArgDoc::pure("DELREF"), ArgDoc::pure("ACKED")]).optional().since("8.2.0")
}

/// `[MAXAGE ms [EXACT]]` of XS.CFGSET (ours, issue 17).
fn maxage_block() -> ArgDoc {
    ArgDoc::group("maxage", "block", vec![ArgDoc::integer("ms"), ArgDoc::pure("EXACT").optional()]).token("MAXAGE").optional()
}

/// Adds MAXAGE (ours, issue 17) to the trimming strategies (`trim` block, `strategy` oneof).
fn add_maxage_strategy(d: &mut Doc) {
    let strategy = d.args.iter_mut().find(|a| a.name == "trim").and_then(|t| t.args.iter_mut().find(|a| a.name == "strategy"));
    if let Some(st) = strategy {
        st.args.push(ArgDoc::pure("MAXAGE"));
    }
}

/// `IDS numids id [id ...]`.
fn ids_block() -> ArgDoc {
    ArgDoc::group("ids", "block", vec![ArgDoc::integer("numids"), ArgDoc::string("id").multiple()]).token("IDS")
}

/// The documentation of a command no twin on this host documents (`name` as registered).
pub fn own_doc(name: &str) -> Option<Doc> {
    let d = match name.to_ascii_lowercase().as_str() {
        "xs.type" => doc(
            "Determines the type of value stored at a key; `stream` for the module's streams too.",
            "O(1)",
            vec![ArgDoc::key("key")],
        ),
        "xs.scan" => doc(
            "Iterates over the key names in the database; `TYPE stream` also matches the module's streams.",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            vec![
                ArgDoc::integer("cursor"),
                ArgDoc::new("pattern", "pattern").token("MATCH").optional(),
                ArgDoc::integer("count").token("COUNT").optional(),
                ArgDoc::string("type").token("TYPE").optional(),
            ],
        ),
        "xs.import" => doc(
            "Converts a built-in stream into an xstream stream in place, with its groups, consumers, pending entries and TTL.",
            "O(N) with N the size of the stream.",
            vec![ArgDoc::key("key")],
        ),
        "xs.export" => doc(
            "Converts an xstream stream into a built-in stream in place, with its groups, consumers, pending entries and TTL.",
            "O(N) with N the size of the stream.",
            vec![ArgDoc::key("key"), ArgDoc::pure("DROPPOLICIES").optional()],
        ),
        "xs.delex" => doc(
            "Deletes one or multiple entries from the stream, with a policy for entries that consumer groups still reference.",
            "O(1) for each single item to delete in the stream, regardless of the stream size.",
            vec![ArgDoc::key("key"), policy(), ids_block()],
        ),
        "xs.ackdel" => doc(
            "Acknowledges and conditionally deletes one or multiple entries for a stream consumer group.",
            "O(1) for each entry ID processed.",
            vec![ArgDoc::key("key"), ArgDoc::string("group"), policy(), ids_block()],
        ),
        "xs.compact" => doc(
            "Rewrites the stream's nodes without their deleted entries and merges neighbouring nodes that fit the node limits; replies with the bytes freed.",
            "O(N) with N the number of nodes rewritten, bounded by LIMIT.",
            vec![ArgDoc::key("key"), ArgDoc::integer("nodes").token("LIMIT").optional()],
        ),
        "xs.nack" => doc(
            "Returns pending entries of a consumer group to the group without acknowledging them.",
            "O(1) for each entry ID processed.",
            vec![
                ArgDoc::key("key"),
                ArgDoc::string("group"),
                ArgDoc::group("mode", "oneof", vec![ArgDoc::pure("SILENT"), ArgDoc::pure("FAIL"), ArgDoc::pure("FATAL")]),
                ids_block(),
                ArgDoc::integer("count").token("RETRYCOUNT").optional(),
                ArgDoc::pure("FORCE").optional(),
            ],
        ),
        "xs.cfgset" => doc(
            "Sets the idempotent-production window of a stream (how long, and how many, producer IDs are remembered), and its retention by age (MAXAGE).",
            "O(1); O(N) when a change clears the N tracked iids.",
            vec![
                ArgDoc::key("key"),
                ArgDoc::integer("duration").token("IDMP-DURATION").optional(),
                ArgDoc::integer("maxsize").token("IDMP-MAXSIZE").optional(),
                maxage_block(),
            ],
        ),
        "xs.idmprecord" => doc(
            "Records that an idempotent ID of a producer produced a given entry (used by AOF rewrite).",
            "O(1)",
            vec![ArgDoc::key("key"), ArgDoc::string("pid"), ArgDoc::string("iid"), ArgDoc::string("stream-id")],
        ),
        "xs.idmpexpire" => doc(
            "Removes the idempotent IDs whose window has passed (internal: the primary's expiry, as replicated).",
            "O(N) with N the iids removed, at most the LIMIT.",
            vec![
                ArgDoc::key("key"),
                ArgDoc::integer("now-ms"),
                ArgDoc::integer("work").token("LIMIT"),
                ArgDoc::string("pid").token("FROM").optional(),
            ],
        ),
        // Reliable-queue policies (issue 16): subcommands of XS.GROUP no XGROUP has.
        "xs.group|setpolicy" => doc(
            "Sets the reliable-queue policy of a consumer group: dead letters after a number of deliveries, redelivery after an ack timeout with backoff, expiry of idle consumers.",
            "O(1)",
            vec![
                ArgDoc::key("key"),
                ArgDoc::string("group"),
                ArgDoc::group(
                    "max-deliveries",
                    "block",
                    vec![
                        ArgDoc::integer("n").token("MAXDELIVERIES"),
                        ArgDoc::group(
                            "target",
                            "oneof",
                            vec![ArgDoc { key_spec_index: Some(1), ..ArgDoc::key("dlq-key") }.token("DEADLETTER"), ArgDoc::pure("DROP")],
                        ),
                    ],
                )
                .optional(),
                ArgDoc::group(
                    "ack-timeout",
                    "block",
                    vec![
                        ArgDoc::integer("ms").token("ACKTIMEOUT"),
                        ArgDoc::new("factor", "double").token("BACKOFF").optional(),
                        ArgDoc::integer("max-ms").token("MAXBACKOFF").optional(),
                    ],
                )
                .optional(),
                ArgDoc::integer("ttl-ms").token("CONSUMERTTL").optional(),
                ArgDoc::pure("RESET").optional(),
            ],
        ),
        // Delayed delivery (issue 17).
        "xs.group|schedule" => doc(
            "Adds entries added with NOTBEFORE/DELAY that the group passed over to its schedule (the propagated form of a `>` read).",
            "O(N*log(M)) with N the number of IDs and M the size of the schedule.",
            vec![ArgDoc::key("key"), ArgDoc::string("group"), ArgDoc::string("id").multiple()],
        ),
        "xs.group|unschedule" => doc(
            "Removes entries from the schedule of a consumer group (the propagated form of a NOACK `>` read).",
            "O(N*log(M)) with N the number of IDs and M the size of the schedule.",
            vec![ArgDoc::key("key"), ArgDoc::string("group"), ArgDoc::string("id").multiple()],
        ),
        "xs.group|getpolicy" => doc(
            "Returns the reliable-queue policy of a consumer group.",
            "O(1)",
            vec![ArgDoc::key("key"), ArgDoc::string("group")],
        ),
        "xs.group|redrive" => doc(
            "Moves the dead letters of a source stream back to it as new entries, counting their redrives.",
            "O(N) with N the dead-letter entries examined.",
            vec![
                ArgDoc::key("dlq-key"),
                ArgDoc { key_spec_index: Some(1), ..ArgDoc::key("source-key") },
                ArgDoc::integer("count").token("COUNT").optional(),
            ],
        ),
        "xs.group|deadletter" => doc(
            "Moves pending entries of a consumer group to its dead-letter stream.",
            "O(N) with N the number of IDs.",
            vec![ArgDoc::key("key"), ArgDoc::string("group"), ArgDoc::string("id").multiple()],
        ),
        _ => return None,
    };
    Some(d)
}

/// Adds the options the module accepts beyond what `twin`'s tree (from an older host)
/// documents. An option the tree already has (by token) is left as the host documents it.
pub fn extend_twin_doc(name: &str, d: &mut Doc) {
    let has = |d: &Doc, token: &str| {
        fn walk(args: &[ArgDoc], token: &str) -> bool {
            args.iter().any(|a| a.token.as_deref().is_some_and(|t| t.eq_ignore_ascii_case(token)) || walk(&a.args, token))
        }
        walk(&d.args, token)
    };
    // Inserted before the first argument named `before` (or appended).
    let insert = |d: &mut Doc, arg: ArgDoc, before: &str| {
        let at = d.args.iter().position(|a| a.name == before).unwrap_or(d.args.len());
        d.args.insert(at, arg);
    };
    match name.to_ascii_lowercase().as_str() {
        "xs.read" | "xs.readgroup" => {
            if !has(d, "MAXCOUNT") {
                let count_at = d.args.iter().position(|a| a.name == "count").map_or(0, |i| i + 1);
                d.args.insert(count_at, ArgDoc::integer("maxcount").token("MAXCOUNT").optional().since("8.10.0"));
                d.args.insert(count_at + 1, ArgDoc::integer("maxsize").token("MAXSIZE").optional().since("8.10.0"));
            }
            if name.eq_ignore_ascii_case("xs.readgroup") && !has(d, "CLAIM") {
                insert(d, ArgDoc::integer("min-idle-time").token("CLAIM").optional().since("8.4.0"), "noack");
            }
        }
        "xs.add" => {
            if !has(d, "KEEPREF") {
                insert(d, policy(), "trim");
            }
            if !has(d, "IDMP") {
                let idmp = ArgDoc::group(
                    "idempotency",
                    "oneof",
                    vec![
                        ArgDoc::group("idmp", "block", vec![ArgDoc::string("pid"), ArgDoc::string("iid")]).token("IDMP"),
                        ArgDoc::string("pid").token("IDMPAUTO"),
                    ],
                )
                .optional()
                .since("8.6.0");
                insert(d, idmp, "trim");
            }
            if !has(d, "MAXAGE") {
                add_maxage_strategy(d);
            }
            if !has(d, "NOTBEFORE") {
                // Delayed delivery (ours, issue 17).
                let delay = ArgDoc::group(
                    "delay",
                    "oneof",
                    vec![ArgDoc::new("unix-time-milliseconds", "unix-time").token("NOTBEFORE"), ArgDoc::integer("milliseconds").token("DELAY")],
                )
                .optional();
                insert(d, delay, "trim");
            }
        }
        "xs.trim" => {
            if !has(d, "KEEPREF") {
                d.args.push(policy());
            }
            if !has(d, "MAXAGE") {
                add_maxage_strategy(d);
            }
        }
        "xs.cfgset" if !has(d, "MAXAGE") => d.args.push(maxage_block()),
        _ => {}
    }
}
