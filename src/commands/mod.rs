//! The XS.* commands: one file per command family, each `parse -> execute on
//! the stream -> reply`, and this table with every command's metadata.
//!
//! Replies and errors are the built-in's (t_stream.c of the same server); where
//! a message names the command, it is our name (`xs.add`) when called as XS.*,
//! and the built-in's (`xadd`) when the takeover filter brought a standard name
//! (`Ctx::reply_wrong_arity`, `Ctx::command_name`).

// The entry points command_entry! defines are ffi's unsafe code (src/ffi/register.rs).
#![deny(unsafe_code)]

use crate::ffi::register::{Command, KeyAt, RO, RO_ACCESS, RW_DELETE, RW_INSERT, RW_UPDATE};

pub mod ack;
pub mod add;
pub mod claim;
pub mod compact;
#[cfg(feature = "test-hooks")]
pub mod debug;
pub mod del;
pub mod delex;
pub mod group;
pub mod idmp;
pub mod info;
pub mod keyspace;
pub mod len;
pub mod migrate;
pub mod nack;
pub mod pending;
pub mod queue;
pub mod range;
pub mod read;
pub mod redrive;
pub mod setid;
pub mod trim;

use crate::command_entry;

command_entry!(xs_add, add::run);
command_entry!(xs_len, len::run);
command_entry!(xs_range, range::run_range);
command_entry!(xs_revrange, range::run_revrange);
command_entry!(xs_del, del::run);
command_entry!(xs_delex, delex::run_delex);
command_entry!(xs_ackdel, delex::run_ackdel);
command_entry!(xs_trim, trim::run);
command_entry!(xs_cfgset, idmp::run_cfgset);
command_entry!(xs_idmprecord, idmp::run_idmprecord);
command_entry!(xs_idmpexpire, idmp::run_idmpexpire);
command_entry!(xs_compact, compact::run);
command_entry!(xs_setid, setid::run);
command_entry!(xs_info_stream, info::run_stream);
command_entry!(xs_info_groups, info::run_groups);
command_entry!(xs_info_consumers, info::run_consumers);
command_entry!(xs_info_help, info::run_help);
command_entry!(xs_read, read::run_read);
command_entry!(xs_readgroup, read::run_readgroup);
command_entry!(xs_group, group::run);
command_entry!(xs_group_help, group::run_help);
command_entry!(xs_group_setpolicy, queue::run_setpolicy);
command_entry!(xs_group_schedule, group::run_schedule);
command_entry!(xs_group_getpolicy, queue::run_getpolicy);
command_entry!(xs_group_deadletter, queue::run_deadletter);
command_entry!(xs_group_redrive, redrive::run);
command_entry!(xs_ack, ack::run);
command_entry!(xs_nack, nack::run);
command_entry!(xs_import, migrate::run_import);
command_entry!(xs_export, migrate::run_export);
command_entry!(xs_pending, pending::run);
command_entry!(xs_claim, claim::run_claim);
command_entry!(xs_autoclaim, claim::run_autoclaim);
command_entry!(xs_type, keyspace::run_type);
command_entry!(xs_scan, keyspace::run_scan);
#[cfg(feature = "test-hooks")]
command_entry!(xs_debug_panic, debug::run_panic);
#[cfg(feature = "test-hooks")]
command_entry!(xs_debug_double_free, debug::run_double_free);
#[cfg(feature = "test-hooks")]
command_entry!(xs_debug_notify, debug::run_notify);
#[cfg(feature = "test-hooks")]
command_entry!(xs_debug_tier_faults, debug::run_tier_faults);

const fn key1(flags: u32) -> Option<KeyAt> {
    Some(KeyAt { pos: 1, flags, after_streams: false })
}

const fn key2(flags: u32) -> Option<KeyAt> {
    Some(KeyAt { pos: 2, flags, after_streams: false })
}

/// Keys after STREAMS, searched from `from`.
const fn streams(from: i32, flags: u32) -> Option<KeyAt> {
    Some(KeyAt { pos: from, flags, after_streams: true })
}

/// Every command: name, flags, arity and key spec as the built-in twin's
/// (COMPAT.md §5). Redis 7.0 cannot put module commands into `@stream`.
pub static COMMANDS: &[Command] = &[
    Command { name: "xs.add", func: Some(xs_add), flags: "write deny-oom fast", arity: -5, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.len", func: Some(xs_len), flags: "readonly fast", arity: 2, key: key1(RO), subcommands: &[] },
    Command { name: "xs.range", func: Some(xs_range), flags: "readonly", arity: -4, key: key1(RO_ACCESS), subcommands: &[] },
    Command { name: "xs.revrange", func: Some(xs_revrange), flags: "readonly", arity: -4, key: key1(RO_ACCESS), subcommands: &[] },
    Command { name: "xs.del", func: Some(xs_del), flags: "write fast", arity: -3, key: key1(RW_DELETE), subcommands: &[] },
    Command { name: "xs.trim", func: Some(xs_trim), flags: "write", arity: -4, key: key1(RW_DELETE), subcommands: &[] },
    Command { name: "xs.compact", func: Some(xs_compact), flags: "write", arity: -2, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.setid", func: Some(xs_setid), flags: "write deny-oom fast", arity: -3, key: key1(RW_UPDATE), subcommands: &[] },
    Command {
        name: "xs.info",
        func: None,
        flags: "",
        arity: -2,
        key: None,
        subcommands: &[
            Command { name: "consumers", func: Some(xs_info_consumers), flags: "readonly", arity: 4, key: key2(RO_ACCESS), subcommands: &[] },
            Command { name: "groups", func: Some(xs_info_groups), flags: "readonly", arity: 3, key: key2(RO_ACCESS), subcommands: &[] },
            Command { name: "help", func: Some(xs_info_help), flags: "allow-loading allow-stale", arity: 2, key: None, subcommands: &[] },
            Command { name: "stream", func: Some(xs_info_stream), flags: "readonly", arity: -3, key: key2(RO_ACCESS), subcommands: &[] },
        ],
    },
    Command { name: "xs.read", func: Some(xs_read), flags: "readonly blocking getkeys-api", arity: -4, key: streams(1, RO_ACCESS), subcommands: &[] },
    Command {
        name: "xs.readgroup",
        func: Some(xs_readgroup),
        flags: "write blocking getkeys-api",
        arity: -7,
        key: streams(4, RO_ACCESS),
        subcommands: &[],
    },
    Command {
        name: "xs.group",
        func: None,
        flags: "",
        arity: -2,
        key: None,
        subcommands: &[
            Command { name: "create", func: Some(xs_group), flags: "write deny-oom", arity: -5, key: key2(RW_INSERT), subcommands: &[] },
            Command { name: "createconsumer", func: Some(xs_group), flags: "write deny-oom", arity: 5, key: key2(RW_INSERT), subcommands: &[] },
            // Reliable-queue policies (issue 16): no XGROUP twin.
            Command {
                name: "deadletter",
                func: Some(xs_group_deadletter),
                flags: "write deny-oom",
                arity: -5,
                key: key2(RW_UPDATE),
                subcommands: &[],
            },
            Command { name: "delconsumer", func: Some(xs_group), flags: "write", arity: 5, key: key2(RW_DELETE), subcommands: &[] },
            Command { name: "destroy", func: Some(xs_group), flags: "write", arity: 4, key: key2(RW_DELETE), subcommands: &[] },
            Command { name: "getpolicy", func: Some(xs_group_getpolicy), flags: "readonly", arity: 4, key: key2(RO), subcommands: &[] },
            Command { name: "help", func: Some(xs_group_help), flags: "allow-loading allow-stale", arity: 2, key: None, subcommands: &[] },
            // Dead letters back to their source stream (issue 31): the source key is a second
            // key spec (src/ffi/register.rs).
            Command { name: "redrive", func: Some(xs_group_redrive), flags: "write deny-oom", arity: -4, key: key2(RW_DELETE), subcommands: &[] },
            // Delayed delivery (issue 17): the propagated forms of `>` reads' schedule changes.
            Command { name: "schedule", func: Some(xs_group_schedule), flags: "write", arity: -5, key: key2(RW_UPDATE), subcommands: &[] },
            Command { name: "setid", func: Some(xs_group), flags: "write", arity: -5, key: key2(RW_UPDATE), subcommands: &[] },
            // The dead-letter key is a second key spec (DEADLETTER keyword, src/ffi/register.rs).
            Command { name: "setpolicy", func: Some(xs_group_setpolicy), flags: "write deny-oom", arity: -4, key: key2(RW_UPDATE), subcommands: &[] },
            Command { name: "unschedule", func: Some(xs_group_schedule), flags: "write", arity: -5, key: key2(RW_UPDATE), subcommands: &[] },
        ],
    },
    Command { name: "xs.ack", func: Some(xs_ack), flags: "write fast", arity: -4, key: key1(RW_UPDATE), subcommands: &[] },
    // Redis 8.2 (xdelex.json / xackdel.json). XACKDEL's key spec is RW UPDATE DELETE
    // there; the module API refuses more than one of INSERT / UPDATE / DELETE, so it
    // is RW DELETE here (the same ACL key permission: write).
    Command { name: "xs.delex", func: Some(xs_delex), flags: "write fast", arity: -5, key: key1(RW_DELETE), subcommands: &[] },
    Command { name: "xs.ackdel", func: Some(xs_ackdel), flags: "write fast", arity: -6, key: key1(RW_DELETE), subcommands: &[] },
    // Redis 8.8 (xnack.json): arity -7, WRITE FAST, RW UPDATE.
    Command { name: "xs.nack", func: Some(xs_nack), flags: "write fast", arity: -7, key: key1(RW_UPDATE), subcommands: &[] },
    // Redis 8.6 (xcfgset.json, xidmprecord.json); XS.IDMPEXPIRE is ours (the propagated
    // form of the primary's time-driven IDMP expiry, src/commands/idmp.rs).
    Command { name: "xs.cfgset", func: Some(xs_cfgset), flags: "write fast", arity: -2, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.idmprecord", func: Some(xs_idmprecord), flags: "write deny-oom fast", arity: 5, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.idmpexpire", func: Some(xs_idmpexpire), flags: "write fast", arity: -5, key: key1(RW_DELETE), subcommands: &[] },
    Command { name: "xs.pending", func: Some(xs_pending), flags: "readonly", arity: -3, key: key1(RO_ACCESS), subcommands: &[] },
    Command { name: "xs.claim", func: Some(xs_claim), flags: "write fast", arity: -6, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.autoclaim", func: Some(xs_autoclaim), flags: "write fast", arity: -6, key: key1(RW_DELETE), subcommands: &[] },
    // TYPE and SCAN as takeover mode answers them (the filter sends `TYPE key` and
    // `SCAN ... TYPE stream` here); flags, arity and key spec of the built-ins.
    Command { name: "xs.type", func: Some(xs_type), flags: "readonly fast", arity: 2, key: key1(RO), subcommands: &[] },
    Command { name: "xs.scan", func: Some(xs_scan), flags: "readonly", arity: -2, key: None, subcommands: &[] },
    Command { name: "xs.import", func: Some(xs_import), flags: "write deny-oom", arity: 2, key: key1(RW_UPDATE), subcommands: &[] },
    Command { name: "xs.export", func: Some(xs_export), flags: "write deny-oom", arity: -2, key: key1(RW_UPDATE), subcommands: &[] },
    #[cfg(feature = "test-hooks")]
    Command { name: "xs.debug-panic", func: Some(xs_debug_panic), flags: "", arity: 1, key: None, subcommands: &[] },
    #[cfg(feature = "test-hooks")]
    Command { name: "xs.debug-double-free", func: Some(xs_debug_double_free), flags: "", arity: 1, key: None, subcommands: &[] },
    #[cfg(feature = "test-hooks")]
    Command { name: "xs.debug-notify", func: Some(xs_debug_notify), flags: "readonly", arity: 3, key: key1(RO_ACCESS), subcommands: &[] },
    #[cfg(feature = "test-hooks")]
    Command { name: "xs.debug-tier-faults", func: Some(xs_debug_tier_faults), flags: "", arity: -3, key: None, subcommands: &[] },
];

// ---- nodes on disk -----------------------------------------------------------

/// Before a write that reads nodes: `reads` (the reads it will make) run first, so that a node
/// kept on disk that cannot be read back (`xstream.tier-dir`) ends the command with an error
/// before it changed anything (nothing is changed, propagated or replied). Free while no node
/// is on disk.
pub fn read_first(s: &crate::stream::Stream, reads: impl FnOnce(&crate::stream::Stream)) -> crate::error::Result<()> {
    if !crate::tier::cold::has_cold() || s.probe(reads) {
        return Ok(());
    }
    for f in crate::tier::cold::take_faults() {
        crate::ffi::log_warning(&format!("xstream: {f}"));
    }
    Err(crate::error::Error::Err(crate::error::COLD_READ_FAILED))
}

// ---- argument helpers shared by the commands ---------------------------------

pub use crate::error::cstr;

/// Case-insensitive keyword match with C-string semantics.
pub fn is_kw(arg: &[u8], kw: &str) -> bool {
    cstr(arg).eq_ignore_ascii_case(kw.as_bytes())
}

/// getLongLongFromObject: the strict integer form over the whole argument.
pub fn parse_ll(arg: &[u8]) -> crate::error::Result<i64> {
    crate::stream::id::string2ll(arg).ok_or(crate::error::Error::NotInteger)
}
