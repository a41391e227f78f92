//! Time-driven work: each job implements ffi's [`Job`](crate::ffi::timer::Job) over one of the
//! indexes of src/ops/due.rs, and does its work through src/ops. Jobs act only on a primary
//! that is not loading, with clients not paused (`Ctx::acts_on_time`), bounded per tick, and
//! propagate what they did as explicit commands; replicas and the AOF never act on their own
//! clocks. No unsafe code here (lib.rs forbids it).
//!
//! - `wake`: signals keys whose blocked CLAIM / ACKTIMEOUT / delayed readers have something due.
//! - `ttl`: CONSUMERTTL expiry of idle consumers.
//! - `idmp`: expiry of idempotency records.
//! - `age`: retention by age (MAXAGE) of streams nobody writes to.
//! - `pack`: compression of sealed nodes off the append path (every server, nothing propagated).

#![forbid(unsafe_code)]

pub mod age;
pub mod idmp;
pub mod pack;
pub mod ttl;
pub mod wake;

use crate::ops::due;

/// At load: binds every job to its index (the order in which they hear arrivals and loads).
pub fn init() {
    due::IDMP.bind(&idmp::IdmpExpiry);
    due::PACK.bind(&pack::Pack);
    due::AGE.bind(&age::Age);
    due::CONSUMER_TTL.bind(&ttl::ConsumerTtl);
    due::READERS.bind(&wake::Wake);
}

/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: i64 = 1000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: i64 = 1;
