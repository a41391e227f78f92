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
    /// `valkey_version` (Valkey 8+; empty elsewhere).
    pub valkey_version: String,
}

impl Host {
    /// Whether this server is one whose module command dispatcher is known to pass
    /// the command the client's own argument vector, the one
    /// `RedisModule_ReplicateVerbatim` propagates: `RedisModuleCommandDispatcher`
    /// calls `cp->func(&ctx, (void **)c->argv, c->argc)` and RM_ReplicateVerbatim
    /// propagates `ctx->client->argv` in Redis 7.0.15, 7.2.6, 7.4.1, 8.0-m01 and
    /// Valkey 8.0.1 (read in each source tree), Valkey 9.1 (`ValkeyModuleCommandDispatcher`,
    /// the same call; tests/propagation.rs checks replicas and
    /// the AOF on each). Only then may a command rewrite an argument before
    /// propagating verbatim (Ctx::replicate_with); an unknown release falls back to
    /// RedisModule_Replicate.
    pub fn passes_client_argv(&self) -> bool {
        let major = |v: &str| v.split('.').next().and_then(|m| m.parse::<u32>().ok());
        if self.valkey {
            // Valkey 7.2 reports no valkey_version; its dispatcher is Redis 7.2's.
            self.valkey_version.is_empty() && major(&self.redis_version) == Some(7) || matches!(major(&self.valkey_version), Some(7..=9))
        } else {
            matches!(major(&self.redis_version), Some(7..=8))
        }
    }
}

impl Host {
    /// Whether a module's keyspace callback runs on the executing client, selected to the
    /// event's DB and left there: Valkey from 8.1 (valkey-io/valkey #1819) until the fix
    /// (#4024, in 9.1; 9.0 is taken as affected). A notification the module raises in another
    /// DB than the client's, with a subscriber of its class, moves the client to that DB.
    pub fn notifications_move_the_client(&self) -> bool {
        let mut v = self.valkey_version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        self.valkey && (8, 1) <= (major, minor) && (major, minor) < (9, 1)
    }
}

static NOTIFY_MOVES_CLIENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`Host::notifications_move_the_client`] of the running server.
pub fn notifications_move_the_client() -> bool {
    NOTIFY_MOVES_CLIENT.load(std::sync::atomic::Ordering::Relaxed)
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
        valkey_version: field("valkey_version:").unwrap_or_default(),
    }
}

static SUMMARY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Keeps `redis 7.0.15` / `valkey 8.0.1` for INFO xstream.
pub fn remember(h: &Host) {
    NOTIFY_MOVES_CLIENT.store(h.notifications_move_the_client(), std::sync::atomic::Ordering::Relaxed);
    let s = if h.valkey && !h.valkey_version.is_empty() {
        format!("valkey {}", h.valkey_version)
    } else if h.valkey {
        format!("valkey {}", h.redis_version)
    } else {
        format!("redis {}", h.redis_version)
    };
    let _ = SUMMARY.set(s);
}

/// The host as INFO xstream names it.
pub fn summary() -> String {
    SUMMARY.get().cloned().unwrap_or_default()
}
