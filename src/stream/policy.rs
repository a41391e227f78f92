//! Reference policies of Redis 8.2 (REDIS8.md §3): what deleting or trimming an
//! entry does to the consumer groups that still refer to it.
//!
//! ```text
//!   KEEPREF (default)  delete the entry; PEL entries naming it stay ([id, nil] later)
//!   DELREF             delete the entry and remove it from every group's PEL
//!   ACKED              delete only entries no group refers to (see below)
//! ```
//!
//! "Referenced" (streamEntryIsReferenced): the stream has groups, and some group
//! has not had the entry delivered yet (its last ID is below the entry's ID), or
//! some group's PEL holds it.
//!
//! The built-in keeps an `id -> groups` index (`cgroups_ref`) updated on every
//! PEL insert and removal, and caches the minimum group last ID. Here both are
//! computed when a policy needs them: the minimum once per command
//! ([`Stream::min_group_last_id`], one pass over the groups), the PEL test per
//! entry as one lookup per group. So streams that never use a policy pay nothing
//! (no index to maintain on XREADGROUP / XACK / XCLAIM, nothing to rebuild on
//! load), and the result is the same as the built-in's for every sequence of
//! commands; the price is O(groups) per entry examined by a DELREF / ACKED
//! deletion instead of O(1) (docs/redis8.md).

use super::group::Groups;
use super::{Stream, StreamId};

/// KEEPREF / DELREF / ACKED.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefPolicy {
    #[default]
    KeepRef,
    DelRef,
    Acked,
}

impl RefPolicy {
    /// The policy a keyword names (case-insensitive), if any.
    pub fn from_keyword(arg: &[u8]) -> Option<RefPolicy> {
        if arg.eq_ignore_ascii_case(b"KEEPREF") {
            Some(RefPolicy::KeepRef)
        } else if arg.eq_ignore_ascii_case(b"DELREF") {
            Some(RefPolicy::DelRef)
        } else if arg.eq_ignore_ascii_case(b"ACKED") {
            Some(RefPolicy::Acked)
        } else {
            None
        }
    }
}

/// XDELEX / XACKDEL per-ID reply: the ID was not found (or, for XACKDEL, not
/// pending in the group).
pub const DELEX_NOT_FOUND: i64 = -1;
/// The entry was deleted (or deletion was allowed and it was already gone).
pub const DELEX_DELETED: i64 = 1;
/// ACKED: the entry is still referenced and was kept.
pub const DELEX_REFERENCED: i64 = 2;

/// The smallest last ID of all groups, None without groups.
pub fn min_last_id(groups: Option<&Groups>) -> Option<StreamId> {
    groups?.values().map(|g| g.last_id).min()
}

/// streamEntryIsReferenced, with the groups' minimum last ID computed beforehand.
pub fn is_referenced(groups: Option<&Groups>, min_last: Option<StreamId>, id: StreamId) -> bool {
    let (Some(groups), Some(min_last)) = (groups, min_last) else { return false };
    if min_last < id {
        return true;
    }
    // The value slab, not a walk of the tree: the order does not matter here.
    let key = id.to_be_bytes();
    groups.values().any(|g| g.pel().get(&key).is_some())
}

/// streamCleanupEntryCGroupRefs: removes `id` from every group's PEL (and its
/// owner's). Returns how many PELs held it.
/// (`groups`: from [`Stream::groups_all_mut`], which records the change for the totals.)
pub fn unref_everywhere(groups: Option<&mut Groups>, id: StreamId) -> usize {
    let Some(groups) = groups else { return 0 };
    let mut n = 0;
    for g in groups.values_mut() {
        if g.ack(id) {
            n += 1;
        }
    }
    n
}

/// The deletions of one XDELEX / XACKDEL, for first_id and max_deleted_entry_id.
#[derive(Clone, Copy, Default)]
struct Deletions {
    /// The greatest ID deleted.
    max: StreamId,
    /// The first entry was deleted.
    first: bool,
}

/// What an XDELEX or XACKDEL did, beside its per-ID reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelOutcome {
    /// One reply per ID, in argument order: -1, 1 or 2.
    pub replies: Vec<i64>,
    /// Entries deleted from the stream.
    pub deleted: u64,
    /// PEL entries removed (XACKDEL's acks, and DELREF's cleanup).
    pub unreferenced: u64,
}

impl Stream {
    /// The smallest last ID of all groups (min_cgroup_last_id), None without groups.
    pub fn min_group_last_id(&self) -> Option<StreamId> {
        min_last_id(self.groups.get())
    }

    /// streamEntryIsReferenced.
    pub fn is_referenced(&self, id: StreamId) -> bool {
        is_referenced(self.groups.get(), self.min_group_last_id(), id)
    }

    /// DELREF's cleanup of `id`, then its deletion, counted in `out` and `d`.
    /// Returns whether the entry existed.
    fn release(&mut self, id: StreamId, policy: RefPolicy, out: &mut DelOutcome, d: &mut Deletions) -> bool {
        if policy == RefPolicy::DelRef {
            out.unreferenced += unref_everywhere(self.groups.all_mut(), id) as u64;
        }
        if !self.delete(id) {
            return false;
        }
        d.first |= id == self.first_id;
        d.max = d.max.max(id);
        out.deleted += 1;
        true
    }

    /// After deletions: first_id and max_deleted_entry_id as xdelCommand keeps them.
    fn after_deletions(&mut self, d: Deletions) {
        if d.max > self.max_deleted_entry_id {
            self.max_deleted_entry_id = d.max;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if d.first {
            self.first_id = self.edge_id(true, true);
        }
    }

    /// XDELEX: per ID, ACKED keeps a referenced entry (2, whether it exists or
    /// not); otherwise DELREF first removes the ID from every PEL (even when the
    /// entry is gone), then the entry is deleted (1) or was not found (-1).
    pub fn delete_ex(&mut self, ids: &[StreamId], policy: RefPolicy) -> DelOutcome {
        let mut out = DelOutcome { replies: Vec::with_capacity(ids.len()), ..Default::default() };
        let min_last = if policy == RefPolicy::Acked { min_last_id(self.groups.get()) } else { None };
        let mut d = Deletions::default();
        for &id in ids {
            let reply = if policy == RefPolicy::Acked && is_referenced(self.groups.get(), min_last, id) {
                DELEX_REFERENCED
            } else if self.release(id, policy, &mut out, &mut d) {
                DELEX_DELETED
            } else {
                DELEX_NOT_FOUND
            };
            out.replies.push(reply);
        }
        if out.deleted > 0 {
            self.after_deletions(d);
        }
        out
    }

    /// XACKDEL: per ID, -1 unless pending in group `gname`; else acknowledged,
    /// then kept (2) under ACKED while still referenced, or deleted (1, also when
    /// the entry was already gone), DELREF removing it from every PEL first.
    /// None when the group does not exist.
    pub fn ack_del(&mut self, gname: &[u8], ids: &[StreamId], policy: RefPolicy) -> Option<DelOutcome> {
        self.group(gname)?;
        let mut out = DelOutcome { replies: Vec::with_capacity(ids.len()), ..Default::default() };
        // Acks do not move any group's last ID: the minimum holds for the whole call.
        let min_last = if policy == RefPolicy::Acked { min_last_id(self.groups.get()) } else { None };
        let mut d = Deletions::default();
        for &id in ids {
            let acked = self.groups.get_mut(gname).is_some_and(|g| g.ack(id));
            if !acked {
                out.replies.push(DELEX_NOT_FOUND);
                continue;
            }
            out.unreferenced += 1;
            if policy == RefPolicy::Acked && is_referenced(self.groups.get(), min_last, id) {
                out.replies.push(DELEX_REFERENCED);
                continue;
            }
            // Deletion allowed: 1 even when the entry was already gone.
            self.release(id, policy, &mut out, &mut d);
            out.replies.push(DELEX_DELETED);
        }
        if out.deleted > 0 {
            self.after_deletions(d);
        }
        Some(out)
    }
}
