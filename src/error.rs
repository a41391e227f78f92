//! The one error type of the command layer, and the one place that turns it
//! into the built-in's error strings.

#![forbid(unsafe_code)]

use std::borrow::Cow;

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
