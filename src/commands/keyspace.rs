//! XS.TYPE key, XS.SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]:
//! TYPE and SCAN as takeover mode answers them, our streams being `stream`.
//!
//! In takeover mode the filter sends `TYPE key` here, and `SCAN ... TYPE stream`
//! (the last TYPE option naming `stream`); tools that look at types
//! (`redis-cli --bigkeys` / `--memkeys`, SCAN-based exporters) then see our
//! streams as streams. Callable by name too, with or without takeover.

use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, TypeOf};
use crate::ffi::takeover::{is_stream_type_name, scan_options, ScanOpt};

/// typeCommand: the built-in's answer, `stream` for ours.
pub fn run_type(c: &Ctx) -> Result<()> {
    match c.type_of(1) {
        TypeOf::Builtin(name) => c.reply_status(name),
        TypeOf::Ours => c.reply_status(c"stream"),
        // Another module's type: its name is the server's to say.
        TypeOf::OtherModule => forward(c, c"TYPE", &[1])?,
    }
    Ok(())
}

/// SCAN. With `TYPE stream` (as the last TYPE), the scan runs without its TYPE
/// options (the same cursor walk, COUNT, MATCH and expiry filtering: the
/// built-in filters by type after scanning, scanGenericCommand step 3) and the
/// keys holding a stream, built-in or ours, are kept. Otherwise it is SCAN as given.
pub fn run_scan(c: &Ctx) -> Result<()> {
    let argc = c.argc();
    let mut keep = vec![1];
    let mut type_at = None;
    let ok = scan_options(
        argc,
        |i| c.arg(i),
        |opt, i| match opt {
            ScanOpt::Type => type_at = Some(i + 1),
            ScanOpt::Count | ScanOpt::Match => keep.extend([i, i + 1]),
        },
    );
    if !(ok && type_at.is_some_and(|i| is_stream_type_name(c.arg(i)))) {
        let all: Vec<usize> = (1..argc).collect();
        return forward(c, c"SCAN", &all);
    }
    let r = c.call(c"SCAN", &keep).ok_or(Error::Err("SCAN failed"))?;
    let reply = r.as_ref();
    let (Some(cursor), Some(keys)) = (reply.get(0), reply.get(1)) else {
        // An error (invalid cursor, COUNT): the server's own text.
        c.reply_call(reply);
        return Ok(());
    };
    c.reply_array(2);
    c.reply_call(cursor);
    c.reply_array_postponed();
    let mut n = 0;
    for i in 0..keys.len() {
        if let Some(name) = keys.get(i).and_then(|k| k.bytes()) {
            if c.is_any_stream(name) {
                c.reply_bulk(name);
                n += 1;
            }
        }
    }
    c.set_array_len(n);
    Ok(())
}

/// Runs `cmd` with arguments `args` and replies its reply unchanged.
fn forward(c: &Ctx, cmd: &std::ffi::CStr, args: &[usize]) -> Result<()> {
    let r = c.call(cmd, args).ok_or_else(|| Error::Full(format!("ERR {} is not available", cmd.to_string_lossy().to_uppercase())))?;
    c.reply_call(r.as_ref());
    Ok(())
}
