//! The host server: which Redis (or Valkey) the module runs in, for the
//! `xstream.compat host` reply level.

use redis_module::{Context, RedisValue};

/// What INFO server says of the server.
#[derive(Debug, Default)]
pub struct Host {
    /// `redis_version` (Valkey reports the Redis release it is compatible with, 7.2.4).
    pub redis_version: String,
    /// `server_name:valkey` (Valkey 8+).
    pub valkey: bool,
}

/// The host, from INFO server (empty fields if the reply has none).
pub fn detect(ctx: &Context) -> Host {
    let text = match ctx.call("INFO", &["server"]) {
        Ok(RedisValue::SimpleString(s)) | Ok(RedisValue::BulkString(s)) => s,
        Ok(RedisValue::BulkRedisString(s)) => s.to_string_lossy(),
        Ok(RedisValue::StringBuffer(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => return Host::default(),
    };
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    Host {
        redis_version: field("redis_version:").unwrap_or_default(),
        valkey: field("server_name:").is_some_and(|n| n.eq_ignore_ascii_case("valkey")),
    }
}
