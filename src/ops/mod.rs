//! Writes shared by the commands and the time-driven jobs: change a stream, then propagate,
//! notify, signal and count. Each takes typed arguments and [`Name`](crate::ffi::ctx::Name)s
//! (a command's argument or bytes a job holds), never a command line to parse, and decides
//! what replicas and the AOF receive: always an explicit, deterministic command.
//!
//! Layers (ARCHITECTURE.md): commands and jobs call down into ops; ops call ffi's safe surface
//! and the core; ops never name a command or a job.
//!
//! - `due`: the indexes of time-driven work (what is due when), which commands fill and jobs
//!   serve.
//! - `trim`: exact trim thresholds, compaction of touched nodes, trimming by age.
//! - `consumers`: expiry of idle consumers (CONSUMERTTL).
//! - `idmp`: expiry of idempotency records.

#![forbid(unsafe_code)]

pub mod consumers;
pub mod due;
pub mod idmp;
pub mod trim;
