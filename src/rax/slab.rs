//! A growable array addressed by index, stored in chunks of [`CHUNK`] elements: the
//! value slab of a [`Rax`](super::Rax) and the node slab of a group's time list.
//!
//! A `Vec` that grows copies everything it holds: by doubling (half of it spare on
//! average after a growth), or, as these slabs did, by an eighth (little spare, but each
//! element copied about eight times over its life: for a PEL of 100,000 entries that
//! grows by one delivery at a time, realloc and memcpy were half the cost of
//! XS.READGROUP). Here only the first chunk grows that way, up to [`CHUNK`] elements;
//! every further chunk is allocated whole and never moves. So an element is copied at
//! most while the slab is small, and the spare room of a large slab is under one chunk.
//!
//! ```text
//!   chunks[0]  [0 .. 1024)      grown by an eighth (at least 8) until full
//!   chunks[1]  [1024 .. 2048)   allocated with room for 1024, never moved
//!   ...
//!   chunks[k]  the last one: the only one not full
//! ```
//!
//! A slab of one chunk has no table: the chunk is the slab.

/// Elements per chunk (a power of two: the index splits into chunk and offset).
pub const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 10;

/// Room the first chunk gains when full at `cap` elements: doubling up to 8 (a slab of one
/// group or one node is one element, not eight: 1,664 bytes for a stream's first group),
/// then an eighth, at least 8.
fn first_chunk_growth(cap: usize) -> usize {
    if cap < 8 {
        cap.max(1)
    } else {
        (cap / 8).max(8)
    }
}

/// See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct Slab<T>(Chunks<T>);

/// Every chunk but the last is full, so the chunks' lengths are the slab's length: no field
/// of its own (a group record's time list is 8 bytes smaller for it).
#[derive(Clone, Debug)]
enum Chunks<T> {
    /// The first chunk, before a second one is needed: no table. A group's time list and a
    /// small stream's nodes never leave it, and a table of one chunk was a 32-byte
    /// allocation in each.
    One(Vec<T>),
    /// Two chunks or more. A boxed slice, not a vector, for 8 bytes more: it grows by one
    /// chunk at a time (reallocated, a copy of 24 bytes per chunk, once per [`CHUNK`]
    /// elements).
    Many(Box<[Vec<T>]>),
}

// The table's variant sits in the vector's spare bits: a slab is a vector's 24 bytes.
const _: () = assert!(std::mem::size_of::<Slab<u64>>() == 24);

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slab<T> {
    pub const fn new() -> Self {
        Slab(Chunks::One(Vec::new()))
    }

    /// The chunks (one, maybe empty, before the first element).
    #[inline]
    fn chunks(&self) -> &[Vec<T>] {
        match &self.0 {
            Chunks::One(c) => std::slice::from_ref(c),
            Chunks::Many(t) => t,
        }
    }

    #[inline]
    fn chunks_mut(&mut self) -> &mut [Vec<T>] {
        match &mut self.0 {
            Chunks::One(c) => std::slice::from_mut(c),
            Chunks::Many(t) => t,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        let chunks = self.chunks();
        match chunks.last() {
            Some(c) => ((chunks.len() - 1) << CHUNK_BITS) + c.len(),
            None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.chunks().last().is_none_or(Vec::is_empty)
    }

    /// Elements the chunks have room for.
    pub fn capacity(&self) -> usize {
        self.chunks().iter().map(Vec::capacity).sum()
    }

    /// Bytes held: the chunks' room and the chunk table.
    pub fn mem_bytes(&self) -> usize {
        let table = match &self.0 {
            Chunks::One(_) => 0,
            Chunks::Many(t) => t.len() * std::mem::size_of::<Vec<T>>(),
        };
        self.capacity() * std::mem::size_of::<T>() + table
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks().get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks_mut().get_mut(i >> CHUNK_BITS)?.get_mut(i & (CHUNK - 1))
    }

    /// Appends `v`; returns its index.
    pub fn push(&mut self, v: T) -> usize {
        let i = self.len();
        match self.chunks_mut().last_mut() {
            Some(c) if c.len() < CHUNK => {
                if c.len() == c.capacity() {
                    // Only the first chunk is ever short of room (later ones start whole);
                    // most slabs (a group's time list, a small stream's nodes) never leave
                    // it, and it starts with room for one.
                    c.reserve_exact(first_chunk_growth(c.capacity()).min(CHUNK - c.len()));
                }
                c.push(v);
            }
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(v);
                let mut table = match std::mem::take(&mut self.0) {
                    Chunks::One(first) => Vec::from([first]),
                    Chunks::Many(t) => t.into_vec(),
                };
                table.reserve_exact(1);
                table.push(c);
                self.0 = Chunks::Many(table.into_boxed_slice());
            }
        }
        i
    }

    /// Room for `n` more elements, exactly while they fit in the first chunk (loading:
    /// `n` counts elements that exist, not a number read from the input).
    pub fn reserve(&mut self, n: usize) {
        if let Chunks::One(first) = &mut self.0 {
            let want = (first.len() + n).min(CHUNK);
            first.reserve_exact(want.saturating_sub(first.len()));
        }
    }

    /// Removes every element; keeps the first chunk's room when it is at most `keep`
    /// elements (a slab that empties and fills again, like a queue's PEL, then does not
    /// allocate each time), releases everything otherwise.
    pub fn clear(&mut self, keep: usize) {
        match &mut self.0 {
            Chunks::One(c) if c.capacity() <= keep => c.clear(),
            _ => *self = Slab::new(),
        }
    }

    /// Every element, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks().iter().flatten()
    }

    /// Every element, in index order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.chunks_mut().iter_mut().flatten()
    }
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks::One(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_across_chunks_like_a_vec() {
        let mut s = Slab::new();
        let mut v = Vec::new();
        for i in 0..(3 * CHUNK + 17) {
            assert_eq!(s.push(i * 7), i);
            v.push(i * 7);
        }
        assert_eq!(s.len(), v.len());
        for (i, x) in v.iter().enumerate() {
            assert_eq!(s.get(i), Some(x));
        }
        assert_eq!(s.get(v.len()), None);
        assert_eq!(s.get(usize::MAX), None);
        if let Some(x) = s.get_mut(CHUNK) {
            *x = 1;
        }
        v[CHUNK] = 1;
        assert!(s.iter().eq(v.iter()));
        for x in s.iter_mut() {
            *x += 1;
        }
        assert!(s.iter().copied().eq(v.iter().map(|x| x + 1)));
    }

    #[test]
    fn spare_room_is_under_one_chunk_and_small_slabs_stay_small() {
        let mut s = Slab::new();
        assert_eq!(s.mem_bytes(), 0);
        s.push(0u64);
        // One element, and no chunk table.
        assert_eq!((s.capacity(), s.mem_bytes()), (1, 8));
        for (i, cap) in [(2, 2), (3, 4), (5, 8), (9, 16)] {
            while s.len() < i {
                s.push(0);
            }
            assert_eq!(s.capacity(), cap, "{i} elements");
        }
        for n in [100, CHUNK, CHUNK + 1, 10 * CHUNK + 3, 100_000] {
            while s.len() < n {
                s.push(0);
            }
            let spare = s.capacity() - s.len();
            assert!(spare < CHUNK, "{n}: {spare} spare");
            if n <= CHUNK {
                assert!(spare <= n / 8 + 8, "{n}: {spare} spare");
            }
        }
    }

    #[test]
    fn reserve_is_exact_within_the_first_chunk() {
        let mut s: Slab<u8> = Slab::new();
        s.reserve(100);
        assert_eq!(s.capacity(), 100);
        for _ in 0..100 {
            s.push(1);
        }
        assert_eq!(s.capacity(), 100);
        s.clear(100);
        assert_eq!((s.len(), s.capacity(), s.get(0)), (0, 100, None));
        s.clear(99);
        assert_eq!((s.len(), s.capacity()), (0, 0));
        let mut big: Slab<u8> = Slab::new();
        big.reserve(10 * CHUNK);
        assert_eq!(big.capacity(), CHUNK);
    }
}
