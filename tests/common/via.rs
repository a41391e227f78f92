//! How a command reaches the server in the takeover tests: plainly, inside MULTI/EXEC, from a
//! Lua script (`EVAL ... redis.call(unpack(ARGV))`) or from a function (`FCALL xcall`). The
//! same path is used for both servers; the reply of the command itself is extracted so that the
//! runners compare (and model) it as if it had been sent plainly.

use crate::common::groups::Node;
use crate::common::*;
use std::collections::BTreeMap;

/// Lua body that runs its arguments as one command.
pub const EVAL_SCRIPT: &str = "return redis.call(unpack(ARGV))";
/// The same as a script that declares it writes nothing (`flags=no-writes`).
pub const EVAL_NO_WRITES: &str = "#!lua flags=no-writes\nreturn redis.call(unpack(ARGV))";

/// A function library: `xcall` runs its arguments as one command, `xaddrange` adds an entry
/// (key, id, field, value) and returns the whole stream, `xlenrange` returns
/// `{XLEN, XREVRANGE + - COUNT n}` (read-only, `no-writes`).
pub const FUNCTION_LIBRARY: &str = "#!lua name=xtakeover
redis.register_function('xcall', function(keys, args) return redis.call(unpack(args)) end)
redis.register_function('xaddrange', function(keys, args)
  redis.call('XADD', keys[1], args[1], args[2], args[3])
  return redis.call('XRANGE', keys[1], '-', '+')
end)
redis.register_function{function_name='xlenrange', callback=function(keys, args)
  return {redis.call('xlen', keys[1]), redis.call('xrevrange', keys[1], '+', '-', 'COUNT', args[1])}
end, flags={'no-writes'}}
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Plain,
    Multi,
    Eval,
    Fcall,
    /// A read through `EVAL_RO` (a read-only script).
    EvalRo,
    /// A read through `EVAL` of a script with the `no-writes` flag.
    NoWrites,
    /// A read while writes are paused: `CLIENT PAUSE 5000 WRITE`, the command, `CLIENT UNPAUSE`
    /// (the failover sequence; a read there must propagate nothing, or Redis aborts).
    Paused,
    /// Plainly, on a connection authenticated as one of the restricted users of
    /// [`ACL_USERS`] (the same user on both servers).
    User,
}

/// The restricted ACL users of the takeover runners (name, rules): denials by category, by
/// command and subcommand, by key pattern and by read / write key permission, each reached
/// through the commands the generators send. The runners compare the replies (NOPERM texts
/// included) and, at the end, the ACL LOG of both servers.
pub const ACL_USERS: [(&str, &str); 6] = [
    ("reader", "~* +@all -@write"),
    ("noxadd", "~* +@all -xadd -xgroup|create -xinfo|stream -xautoclaim"),
    ("somekeys", "~n1* ~n3* ~str +@all"),
    ("readwrite", "%R~* %W~n2* +@all"),
    ("noblock", "~* +@all -@blocking"),
    ("nostream", "~* +@all -@stream +xlen +xrange"),
];

impl Via {
    /// Mostly plain; now and then a transaction, a script or a function.
    pub fn pick(rng: &mut Rng) -> Via {
        match rng.below(100) {
            0..=84 => Via::Plain,
            85..=89 => Via::Multi,
            90..=94 => Via::Eval,
            _ => Via::Fcall,
        }
    }

    /// For a read-only command ([`read_only`]): [`Via::pick`], and now and then `EVAL_RO` or a
    /// write pause.
    pub fn pick_read(rng: &mut Rng) -> Via {
        match rng.below(100) {
            0..=2 => Via::EvalRo,
            3..=5 => Via::NoWrites,
            6..=9 => Via::Paused,
            _ => Via::pick(rng),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Via::Plain => "plain",
            Via::Multi => "MULTI/EXEC",
            Via::Eval => "EVAL",
            Via::Fcall => "FCALL",
            Via::EvalRo => "EVAL_RO",
            Via::NoWrites => "EVAL no-writes",
            Via::Paused => "CLIENT PAUSE WRITE",
            Via::User => "as a restricted ACL user",
        }
    }

    pub fn tag(self) -> &'static str {
        match self {
            Via::Plain => "",
            Via::Multi => " [in MULTI/EXEC]",
            Via::Eval => " [via EVAL]",
            Via::Fcall => " [via FCALL xcall]",
            Via::EvalRo => " [via EVAL_RO]",
            Via::NoWrites => " [via EVAL of a no-writes script]",
            Via::Paused => " [while CLIENT PAUSE WRITE]",
            Via::User => " [as a restricted ACL user]",
        }
    }
}

/// Creates the [`ACL_USERS`] on a server (password `pw`), with room in the ACL LOG for the
/// whole run; returns a connection authenticated as each.
pub fn acl_users(s: &Server) -> Vec<Conn> {
    let mut admin = s.conn();
    for (name, rules) in ACL_USERS {
        let mut cmd = vec!["ACL", "SETUSER", name, "reset", "on", ">pw"];
        cmd.extend(rules.split(' '));
        assert_eq!(admin.cmd(&cmd), Reply::Simple("OK".into()), "ACL SETUSER {name} {rules}");
    }
    assert_eq!(admin.cmd(&["CONFIG", "SET", "acllog-max-len", "100000"]), Reply::Simple("OK".into()));
    assert_eq!(admin.cmd(&["ACL", "LOG", "RESET"]), Reply::Simple("OK".into()));
    ACL_USERS
        .iter()
        .map(|(name, _)| {
            let mut c = s.conn();
            assert_eq!(c.cmd(&["AUTH", name, "pw"]), Reply::Simple("OK".into()));
            c
        })
        .collect()
}

/// A server's ACL LOG as counts per (reason, object, username): the fields the built-in and
/// the module's entries share (the module's `context` reads `module`, and entries that differ
/// only there are merged by the log, so only the sums compare).
pub fn acl_log_counts(c: &mut Conn) -> BTreeMap<(String, String, String), i64> {
    let mut t = BTreeMap::new();
    let log = c.cmd(&["ACL", "LOG", "1000000"]);
    for e in log.as_array() {
        let f = |n: &str| e.field(n).map(|v| v.text()).unwrap_or_default();
        let n = match e.field("count") {
            Some(Reply::Int(n)) => *n,
            _ => 0,
        };
        *t.entry((f("reason"), f("object"), f("username"))).or_insert(0) += n;
    }
    t
}

/// Loads the function library (replacing it) on a connection; panics if refused.
pub fn load_functions(c: &mut Conn) {
    let r = c.cmd(&["FUNCTION", "LOAD", "REPLACE", FUNCTION_LIBRARY]);
    assert_eq!(r, Reply::Bulk(b"xtakeover".to_vec()), "FUNCTION LOAD: {r}");
}

/// Converts an exact RESP tree back to a [`Reply`].
pub fn node_to_reply(n: &Node) -> Reply {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match n.t {
        b'+' => Reply::Simple(s(&n.head)),
        b'-' => Reply::Error(s(&n.head)),
        b'!' => Reply::Error(s(n.blob.as_deref().unwrap_or_default())),
        b':' => Reply::Int(s(&n.head).parse().unwrap_or(0)),
        b'$' => match &n.blob {
            Some(b) => Reply::Bulk(b.clone()),
            None => Reply::Nil,
        },
        b'=' => {
            let b = n.blob.clone().unwrap_or_default();
            if b.len() >= 4 && b[3] == b':' {
                Reply::Verbatim(s(&b[..3]), b[4..].to_vec())
            } else {
                Reply::Verbatim(String::new(), b)
            }
        }
        b'_' => Reply::Nil,
        b',' => Reply::Double(s(&n.head)),
        b'#' => Reply::Bool(n.head == b"t"),
        b'(' => Reply::BigNumber(s(&n.head)),
        b'*' if n.head.starts_with(b"-") => Reply::Nil,
        b'*' => Reply::Array(n.kids.iter().map(node_to_reply).collect()),
        b'~' => Reply::Set(n.kids.iter().map(node_to_reply).collect()),
        b'>' => Reply::Push(n.kids.iter().map(node_to_reply).collect()),
        b'%' => Reply::Map(n.kids.chunks(2).map(|p| (node_to_reply(&p[0]), node_to_reply(&p[1]))).collect()),
        _ => Reply::Nil,
    }
}

/// The result of one command sent through a [`Via`].
pub struct Outcome {
    /// The command's own reply (the EXEC element; the script's result).
    pub reply: Reply,
    pub raw: Vec<u8>,
    /// Everything else the server said on the way (MULTI's `+OK`, `+QUEUED` or the queue-time
    /// error, an EXECABORT): compared too.
    pub side: Vec<u8>,
}

/// Sends `args` through `via`.
pub fn exec_via(c: &mut Conn, via: Via, args: &[Vec<u8>]) -> Outcome {
    match via {
        Via::Plain | Via::User => {
            let (reply, raw) = c.cmd_raw(args);
            Outcome { reply, raw, side: Vec::new() }
        }
        Via::Multi => {
            let mut side = c.raw(&["MULTI"]);
            side.extend(c.raw(args));
            let (exec, raw) = c.cmd_raw(&["EXEC"]);
            match exec {
                Reply::Array(_) => {
                    let n = Node::parse(&raw);
                    assert_eq!(n.kids.len(), 1, "EXEC of one command: {exec}");
                    Outcome { reply: node_to_reply(&n.kids[0]), raw: n.kids[0].to_bytes(), side }
                }
                other => Outcome { reply: other, raw, side },
            }
        }
        Via::Paused => {
            let mut side = c.raw(&["CLIENT", "PAUSE", "5000", "WRITE"]);
            let (reply, raw) = c.cmd_raw(args);
            side.extend(c.raw(&["CLIENT", "UNPAUSE"]));
            Outcome { reply, raw, side }
        }
        Via::Eval | Via::Fcall | Via::EvalRo | Via::NoWrites => {
            let eval = |name: &[u8], script: &str| vec![name.to_vec(), script.as_bytes().to_vec(), b"0".to_vec()];
            let mut full: Vec<Vec<u8>> = match via {
                Via::Eval => eval(b"EVAL", EVAL_SCRIPT),
                Via::EvalRo => eval(b"EVAL_RO", EVAL_SCRIPT),
                Via::NoWrites => eval(b"EVAL", EVAL_NO_WRITES),
                _ => vec![b"FCALL".to_vec(), b"xcall".to_vec(), b"0".to_vec()],
            };
            full.extend(args.iter().cloned());
            let (reply, raw) = c.cmd_raw(&full);
            Outcome { reply, raw, side: Vec::new() }
        }
    }
}

/// Whether a command line only reads (XLEN, XRANGE, XREVRANGE, XREAD, XINFO, XPENDING): it may
/// go through `EVAL_RO` or run while writes are paused (a write would wait for the pause).
pub fn read_only(args: &[Vec<u8>]) -> bool {
    const READS: [&[u8]; 6] = [b"XLEN", b"XRANGE", b"XREVRANGE", b"XREAD", b"XINFO", b"XPENDING"];
    args.first().is_some_and(|n| READS.iter().any(|r| n.eq_ignore_ascii_case(r)))
}

/// Whether a command line can go through a script or a transaction unchanged: no empty
/// command, and not one whose meaning changes there (a blocking read).
pub fn wrappable(args: &[Vec<u8>]) -> bool {
    !args.is_empty() && !args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
}

/// The standard stream command names, spelled as a client might (the filter must not care):
/// mostly upper case, sometimes lower or mixed case.
pub fn spell(rng: &mut Rng, name: &[u8]) -> Vec<u8> {
    if !(name.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'x'))) {
        return name.to_vec();
    }
    match rng.below(100) {
        0..=79 => name.to_vec(),
        80..=89 => name.to_ascii_lowercase(),
        _ => name.iter().map(|c| if rng.pct(50) { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() }).collect(),
    }
}
