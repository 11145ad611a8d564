//! The most-denied keys in bounded memory: a Space-Saving summary (Metwally, Agrawal,
//! El Abbadi 2005) with O(1) work per event and no allocation once it is full.
//!
//! At most `capacity` keys are monitored. A key not monitored that is denied takes the
//! place of the least-counted one and inherits its count as its `error`: for every
//! monitored key, `count - error <= true denials <= count`, and any key denied more than
//! `total / capacity` times is monitored.
//!
//! The entries are kept sorted by count, highest first, in `order`, with equal counts in
//! one `Bucket` (a run of positions): a +1 swaps the entry to the front of its run, so the
//! order never needs a sort and the least-counted entry is always the last.

use std::hash::{BuildHasher, RandomState};

/// The command and limiter kind of an entry's last denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub command: &'static str,
    pub algorithm: &'static str,
}

/// One RL.TOP row, as the command replies it.
pub struct Row {
    pub key: Vec<u8>,
    pub denied: u64,
    pub admitted: u64,
    pub error: u64,
    pub last_denied_ms: i64,
    pub kind: Kind,
}

#[derive(Debug)]
pub struct Entry {
    pub key: Vec<u8>,
    hash: u64,
    pub count: u64,
    pub error: u64,
    pub admitted: u64,
    pub last_ms: i64,
    pub kind: Kind,
    /// Where it is in `order`.
    pos: u32,
    bucket: u32,
}

/// A run of positions in `order` whose entries have the same count.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    count: u64,
    first: u32,
    last: u32,
}

const EMPTY: u32 = u32::MAX;

pub struct Summary {
    capacity: usize,
    entries: Vec<Entry>,
    /// Entry ids, highest count first.
    order: Vec<u32>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// Open addressing, linear probing: entry ids by key hash; twice the capacity.
    index: Vec<u32>,
    /// An upper bound on the true count of any key not monitored: the highest count
    /// ever evicted. A key entering inherits it as its error.
    floor: u64,
    seed: u64,
}

impl Summary {
    pub fn new(capacity: usize) -> Summary {
        let slots = (capacity.max(1) * 2).next_power_of_two();
        // The entries grow as keys are denied (a large rl.top-size costs only what it
        // holds); the index is allocated whole, at 8 bytes per entry.
        let start = capacity.min(64);
        Summary {
            capacity,
            entries: Vec::with_capacity(start),
            order: Vec::with_capacity(start),
            buckets: Vec::with_capacity(start),
            free_buckets: Vec::new(),
            index: vec![EMPTY; slots],
            floor: 0,
            seed: RandomState::new().hash_one(0x5eed_u64),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, key buffers included.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Summary>()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.entries.iter().map(|e| e.key.capacity()).sum::<usize>()
            + self.order.capacity() * 4
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.free_buckets.capacity() * 4
            + self.index.capacity() * 4
    }

    /// The entries, highest count first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.order
            .iter()
            .filter_map(|&id| self.entries.get(id as usize))
    }

    /// One denial of `key`.
    pub fn denied(&mut self, key: &[u8], kind: Kind, now_ms: i64) {
        if self.capacity == 0 {
            return;
        }
        let hash = self.hash(key);
        let id = match self.find(key, hash) {
            Some(id) => id,
            None => self.enter(key, hash),
        };
        self.increment(id);
        if let Some(e) = self.entries.get_mut(id as usize) {
            e.last_ms = now_ms;
            e.kind = kind;
        }
    }

    /// One admission of `key`: counted only if it is monitored.
    pub fn admitted(&mut self, key: &[u8]) {
        if self.entries.is_empty() {
            return;
        }
        let hash = self.hash(key);
        if let Some(id) = self.find(key, hash) {
            if let Some(e) = self.entries.get_mut(id as usize) {
                e.admitted += 1;
            }
        }
    }

    /// Forgets everything (memory included) and starts over.
    pub fn reset(&mut self) {
        *self = Summary::new(self.capacity);
    }

    /// A new capacity: the `capacity` highest entries stay, with their counts and errors;
    /// a smaller summary raises the floor to the highest count it dropped, so the
    /// bounds stay true for keys that come back.
    pub fn resize(&mut self, capacity: usize) {
        if capacity == 0 {
            // Off: nothing is counted from here on, so no bound would survive it.
            *self = Summary::new(0);
            return;
        }
        let kept: Vec<u32> = self.order.iter().copied().take(capacity).collect();
        let dropped_max = self
            .order
            .get(capacity)
            .and_then(|&id| self.entries.get(id as usize))
            .map_or(0, |e| e.count);
        let mut old: Vec<Option<Entry>> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(Some)
            .collect();
        let floor = self.floor.max(dropped_max);
        let seed = self.seed;
        *self = Summary::new(capacity);
        self.floor = floor;
        self.seed = seed;
        for id in kept {
            if let Some(e) = old.get_mut(id as usize).and_then(Option::take) {
                self.push(e);
            }
        }
    }

    /// Appends an entry whose count is not above the last one's (as in `resize`).
    fn push(&mut self, mut e: Entry) {
        let id = self.entries.len() as u32;
        let pos = self.order.len() as u32;
        e.pos = pos;
        e.bucket = match self.last_bucket() {
            Some(b) if self.buckets[b as usize].count == e.count => {
                self.buckets[b as usize].last = pos;
                b
            }
            _ => self.new_bucket(e.count, pos),
        };
        self.insert_index(id, e.hash);
        self.entries.push(e);
        self.order.push(id);
    }

    fn hash(&self, key: &[u8]) -> u64 {
        // A keyed folded-multiply hash: a few instructions per 8 bytes, and the seed,
        // random per process, keeps callers from choosing keys that collide.
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let fold = |a: u64, b: u64| {
            let m = u128::from(a) * u128::from(b);
            (m as u64) ^ ((m >> 64) as u64)
        };
        let mut h = self.seed ^ (key.len() as u64).wrapping_mul(K);
        let mut chunks = key.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = fold(h ^ u64::from_le_bytes(w), K ^ self.seed.rotate_left(17));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = fold(h ^ u64::from_le_bytes(w), K ^ self.seed.rotate_left(29));
        }
        fold(h, K)
    }

    fn mask(&self) -> usize {
        self.index.len() - 1
    }

    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            let id = *self.index.get(i)?;
            if id == EMPTY {
                return None;
            }
            let e = self.entries.get(id as usize)?;
            if e.hash == hash && e.key == key {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert_index(&mut self, id: u32, hash: u64) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.index[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.index[i] = id;
    }

    /// Backward-shift deletion: no tombstones, so probes stay short forever.
    fn remove_index(&mut self, id: u32, hash: u64) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.index[i] != id {
            if self.index[i] == EMPTY {
                return;
            }
            i = (i + 1) & mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let next = self.index[j];
            if next == EMPTY {
                break;
            }
            let home = self.entries[next as usize].hash as usize & mask;
            // `next` may move into the hole at `i` unless its home lies in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.index[i] = next;
                i = j;
            }
        }
        self.index[i] = EMPTY;
    }

    fn last_bucket(&self) -> Option<u32> {
        let &id = self.order.last()?;
        Some(self.entries[id as usize].bucket)
    }

    fn new_bucket(&mut self, count: u64, pos: u32) -> u32 {
        let b = Bucket {
            count,
            first: pos,
            last: pos,
        };
        match self.free_buckets.pop() {
            Some(i) => {
                self.buckets[i as usize] = b;
                i
            }
            None => {
                self.buckets.push(b);
                (self.buckets.len() - 1) as u32
            }
        }
    }

    /// A key not monitored: a new entry at the end with the floor's count, or, when
    /// full, the last (least-counted) entry re-keyed, inheriting its count as error.
    fn enter(&mut self, key: &[u8], hash: u64) -> u32 {
        if self.entries.len() < self.capacity {
            let e = Entry {
                key: key.to_vec(),
                hash,
                count: self.floor,
                error: self.floor,
                admitted: 0,
                last_ms: 0,
                kind: Kind {
                    command: "",
                    algorithm: "",
                },
                pos: 0,
                bucket: 0,
            };
            // The floor is at most every count, so the new entry goes last.
            let id = self.entries.len() as u32;
            self.push(e);
            return id;
        }
        let id = self.order[self.order.len() - 1];
        let old_hash = self.entries[id as usize].hash;
        self.remove_index(id, old_hash);
        let e = &mut self.entries[id as usize];
        self.floor = self.floor.max(e.count);
        e.key.clear();
        e.key.extend_from_slice(key);
        e.hash = hash;
        e.error = e.count;
        e.admitted = 0;
        self.insert_index(id, hash);
        id
    }

    /// +1 to an entry: it moves to the front of its run, and into the run above if
    /// that has the new count.
    fn increment(&mut self, id: u32) {
        let (pos, b) = {
            let e = &self.entries[id as usize];
            (e.pos, e.bucket)
        };
        let bucket = self.buckets[b as usize];
        let front = bucket.first;
        if front != pos {
            let other = self.order[front as usize];
            self.order.swap(front as usize, pos as usize);
            self.entries[other as usize].pos = pos;
            self.entries[id as usize].pos = front;
        }
        let count = bucket.count + 1;
        if bucket.first == bucket.last {
            self.free_buckets.push(b);
        } else {
            self.buckets[b as usize].first += 1;
        }
        let above = front
            .checked_sub(1)
            .map(|p| self.entries[self.order[p as usize] as usize].bucket)
            .filter(|&a| self.buckets[a as usize].count == count);
        let nb = match above {
            Some(a) => {
                self.buckets[a as usize].last = front;
                a
            }
            None => self.new_bucket(count, front),
        };
        let e = &mut self.entries[id as usize];
        e.count = count;
        e.bucket = nb;
    }

    #[cfg(test)]
    fn check(&self) {
        let mut prev = u64::MAX;
        for (pos, &id) in self.order.iter().enumerate() {
            let e = &self.entries[id as usize];
            assert_eq!(e.pos as usize, pos);
            assert!(e.count <= prev, "not sorted");
            prev = e.count;
            let b = self.buckets[e.bucket as usize];
            assert_eq!(b.count, e.count);
            assert!(b.first as usize <= pos && pos <= b.last as usize);
            assert_eq!(self.find(&e.key, e.hash), Some(id));
        }
        let used = self.index.iter().filter(|&&i| i != EMPTY).count();
        assert_eq!(used, self.entries.len());
        assert_eq!(self.order.len(), self.entries.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    const K: Kind = Kind {
        command: "rl.fixed",
        algorithm: "fixed",
    };

    fn bounds_hold(s: &Summary, truth: &HashMap<Vec<u8>, u64>) {
        s.check();
        for e in s.iter() {
            let t = truth.get(&e.key).copied().unwrap_or(0);
            assert!(
                e.count - e.error <= t && t <= e.count,
                "{:?}: count {} error {} true {t}",
                String::from_utf8_lossy(&e.key),
                e.count,
                e.error
            );
        }
    }

    #[test]
    fn counts_exactly_while_it_has_room() {
        let mut s = Summary::new(8);
        for (k, n) in [("a", 3), ("b", 1), ("c", 5)] {
            for _ in 0..n {
                s.denied(k.as_bytes(), K, 7);
            }
        }
        s.check();
        let got: Vec<(&[u8], u64, u64)> =
            s.iter().map(|e| (&e.key[..], e.count, e.error)).collect();
        assert_eq!(
            got,
            vec![(&b"c"[..], 5, 0), (&b"a"[..], 3, 0), (&b"b"[..], 1, 0)]
        );
        assert_eq!(s.iter().next().map(|e| e.last_ms), Some(7));
    }

    #[test]
    fn a_heavy_hitter_is_kept_and_bounded_among_many_light_keys() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut s = Summary::new(64);
        let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut total = 0u64;
        for i in 0..200_000u64 {
            let key: Vec<u8> = if i % 10 == 0 {
                b"heavy".to_vec()
            } else {
                format!("light:{}", rng.gen_range(0..50_000)).into_bytes()
            };
            *truth.entry(key.clone()).or_default() += 1;
            total += 1;
            s.denied(&key, K, 0);
        }
        bounds_hold(&s, &truth);
        let first = s.iter().next().unwrap();
        assert_eq!(first.key, b"heavy");
        // The error is at most total / capacity.
        assert!(first.error <= total / 64, "{}", first.error);
        let sum: u64 = s.iter().map(|e| e.count).sum();
        assert_eq!(sum, total, "Space-Saving's counts add up to the events");
    }

    #[test]
    fn random_streams_keep_the_bounds_and_the_index_consistent() {
        for seed in 0..20u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let cap = rng.gen_range(1..40);
            let mut s = Summary::new(cap);
            let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
            for step in 0..3000 {
                let k = format!("k{}", rng.gen_range(0..cap * 3)).into_bytes();
                if rng.gen_bool(0.2) {
                    let before = s.iter().find(|e| e.key == k).map(|e| e.admitted);
                    s.admitted(&k);
                    let after = s.iter().find(|e| e.key == k).map(|e| e.admitted);
                    assert_eq!(after, before.map(|a| a + 1));
                } else {
                    if s.capacity() > 0 {
                        *truth.entry(k.clone()).or_default() += 1;
                    }
                    s.denied(&k, K, step);
                }
                if step % 500 == 499 {
                    let cap = rng.gen_range(0..40);
                    if cap == 0 {
                        truth.clear();
                    }
                    s.resize(cap);
                    assert!(s.len() <= cap);
                }
                assert!(s.len() <= s.capacity());
            }
            bounds_hold(&s, &truth);
        }
    }

    #[test]
    fn resize_keeps_the_highest_and_the_bounds() {
        let mut s = Summary::new(4);
        let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
        for (k, n) in [("a", 9u64), ("b", 7), ("c", 5), ("d", 3)] {
            for _ in 0..n {
                s.denied(k.as_bytes(), K, 0);
            }
            truth.insert(k.as_bytes().to_vec(), n);
        }
        s.resize(2);
        let keys: Vec<&[u8]> = s.iter().map(|e| &e.key[..]).collect();
        assert_eq!(keys, vec![&b"a"[..], &b"b"[..]]);
        s.resize(8);
        // "c" comes back: it may have been denied up to 5 times unseen.
        s.denied(b"c", K, 0);
        *truth.get_mut(&b"c"[..]).unwrap() += 1;
        bounds_hold(&s, &truth);
        let c = s.iter().find(|e| e.key == b"c").unwrap();
        assert_eq!((c.count, c.error), (6, 5));
    }

    #[test]
    fn reset_and_capacity_zero_hold_nothing() {
        let mut s = Summary::new(4);
        s.denied(b"a", K, 0);
        s.reset();
        assert!(s.is_empty());
        s.denied(b"a", K, 0);
        assert_eq!(s.iter().next().map(|e| (e.count, e.error)), Some((1, 0)));
        s.resize(0);
        s.denied(b"a", K, 0);
        assert!(s.is_empty());
    }

    #[test]
    fn memory_stops_growing_once_full() {
        let mut s = Summary::new(100);
        for i in 0..1000 {
            s.denied(format!("key:{i:08}").as_bytes(), K, 0);
        }
        let full = s.bytes();
        for i in 1000..50_000 {
            s.denied(format!("key:{i:08}").as_bytes(), K, 0);
        }
        assert_eq!(s.bytes(), full);
        s.check();
    }
}
