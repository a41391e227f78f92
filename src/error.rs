//! The one error type of the command layer, and the one place that turns it
//! into the built-in's error strings.

#![forbid(unsafe_code)]

use std::borrow::Cow;

/// The text (after `ERR `) of a command that needed a node kept on disk (`xstream.tier-dir`)
/// whose record could not be read back: an I/O error or a damaged record, logged with its
/// details. Nothing of the command's reply went out before it.
pub const COLD_READ_FAILED: &str = "xstream: a node of this stream could not be read back from disk (xstream.tier-dir; see the server log)";

/// A command error; [`Error::message`] is the exact reply text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `wrong number of arguments for '<cmd>' command` (Redis formats the name).
    WrongArity,
    WrongType,
    Syntax,
    InvalidId,
    NotInteger,
    NoSuchKey,
    /// `ERR <text>`.
    Err(&'static str),
    /// A complete error line, code included.
    Full(String),
}

impl Error {
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            Error::WrongArity => Cow::Borrowed("ERR wrong number of arguments"),
            Error::WrongType => Cow::Borrowed("WRONGTYPE Operation against a key holding the wrong kind of value"),
            Error::Syntax => Cow::Borrowed("ERR syntax error"),
            Error::InvalidId => Cow::Borrowed("ERR Invalid stream ID specified as stream command argument"),
            Error::NotInteger => Cow::Borrowed("ERR value is not an integer or out of range"),
            Error::NoSuchKey => Cow::Borrowed("ERR no such key"),
            Error::Err(s) => Cow::Owned(format!("ERR {s}")),
            Error::Full(s) => Cow::Owned(s.clone()),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Which of the built-in's NOGROUP texts: each command family has its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoGroup {
    /// XPENDING, XCLAIM, XAUTOCLAIM, XNACK: `No such key '<k>' or consumer group '<g>'`.
    KeyOrGroup,
    /// XGROUP, XINFO CONSUMERS and the module's XS.GROUP subcommands: `No such consumer group
    /// '<g>' for key name '<k>'`.
    ForKey,
    /// XREADGROUP: `No such key '<k>' or consumer group '<g>' in XREADGROUP with GROUP option`.
    ReadGroup,
}

impl Error {
    /// The NOGROUP error for `group` of `key`, in the words of `form`. Names are printed as C
    /// prints them with `%s`: up to their first NUL byte.
    pub fn no_group(form: NoGroup, key: &[u8], group: &[u8]) -> Error {
        let (k, g) = (String::from_utf8_lossy(cstr(key)), String::from_utf8_lossy(cstr(group)));
        Error::Full(match form {
            NoGroup::KeyOrGroup => format!("NOGROUP No such key '{k}' or consumer group '{g}'"),
            NoGroup::ForKey => format!("NOGROUP No such consumer group '{g}' for key name '{k}'"),
            NoGroup::ReadGroup => format!("NOGROUP No such key '{k}' or consumer group '{g}' in XREADGROUP with GROUP option"),
        })
    }

    /// NOPERM for a key the user may not touch, in the host's words (getAclErrorMessage:
    /// 7.2 changed them).
    pub fn no_key_permission() -> Error {
        Error::Full(if crate::config::host_level() >= crate::config::Level::V7_2 {
            "NOPERM No permissions to access a key".into()
        } else {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        })
    }
}

/// A byte string as C sees it: up to its first NUL byte. The built-in compares keywords with
/// strcasecmp on the raw buffer (`MAXLEN\0junk` is MAXLEN) and prints names with `%s`.
pub fn cstr(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(n) => &arg[..n],
        None => arg,
    }
}
