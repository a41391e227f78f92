//! The host server: which Redis (or Valkey) the module runs in, for the
//! `xstream.compat host` reply level.

use redis_module::{Context, RedisValue};

/// `redis_version` from INFO server (Valkey reports the Redis release it is
/// compatible with, 7.2.4), or None if the reply has no such field.
pub fn redis_version(ctx: &Context) -> Option<String> {
    let text = match ctx.call("INFO", &["server"]) {
        Ok(RedisValue::SimpleString(s)) | Ok(RedisValue::BulkString(s)) => s,
        Ok(RedisValue::BulkRedisString(s)) => s.to_string_lossy(),
        Ok(RedisValue::StringBuffer(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => return None,
    };
    text.lines().find_map(|l| l.strip_prefix("redis_version:")).map(|v| v.trim().to_string())
}
