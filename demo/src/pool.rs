//! The entity pool: one heap block holding a fixed number of entity slots. memreplay sees
//! the block as an ordinary heap allocation and each entity as an allocation in the
//! "entity pool" domain (defined within the heap), so reports can show both without
//! counting the entities twice.

use memreplay::Domain;

use crate::{ENTITY_BYTES, POOL_SLOTS};

/// A game entity: plain data, 64 bytes, 16-byte aligned (SIMD-friendly).
#[repr(C, align(16))]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Entity {
    pub position: [f32; 3],
    pub health: f32,
    pub velocity: [f32; 3],
    pub kind: u32,
    pub id: u32,
    pub spawn_frame: u32,
    _reserved: [u32; 6],
}

const _: () = assert!(std::mem::size_of::<Entity>() == 64);

impl Entity {
    pub fn new(id: u32, kind: u32, position: [f32; 3], velocity: [f32; 3], spawn_frame: u32) -> Self {
        Entity { position, health: 100.0, velocity, kind, id, spawn_frame, _reserved: [0; 6] }
    }
}

/// Slot `i` of the pool.
pub(crate) type Slot = u32;

pub(crate) struct EntityPool {
    domain: Domain,
    /// The backing block: every slot, live or not.
    slots: Vec<Entity>,
    live: Vec<bool>,
    /// Free slots, lowest on top, so allocation order is deterministic.
    free: Vec<Slot>,
    live_count: usize,
}

impl EntityPool {
    pub fn new(domain: Domain) -> Self {
        EntityPool {
            domain,
            slots: vec![Entity::default(); POOL_SLOTS],
            live: vec![false; POOL_SLOTS],
            free: (0..POOL_SLOTS as Slot).rev().collect(),
            live_count: 0,
        }
    }

    /// The slot's address: what the pool domain's allocation is reported at.
    fn addr(&self, slot: Slot) -> u64 {
        &self.slots[slot as usize] as *const Entity as u64
    }

    /// Places an entity, reporting the allocation with its alignment (`alloc_aligned`) or
    /// without (`alloc`). `None` if the pool is full.
    pub fn spawn(&mut self, entity: Entity, with_alignment: bool) -> Option<Slot> {
        let slot = self.free.pop()?;
        self.slots[slot as usize] = entity;
        self.live[slot as usize] = true;
        self.live_count += 1;
        let addr = self.addr(slot);
        if with_alignment {
            self.domain.alloc_aligned(addr, ENTITY_BYTES as u64, std::mem::align_of::<Entity>() as u64);
        } else {
            self.domain.alloc(addr, ENTITY_BYTES as u64);
        }
        Some(slot)
    }

    pub fn despawn(&mut self, slot: Slot) {
        assert!(self.live[slot as usize], "slot {slot} is not live");
        self.domain.free(self.addr(slot));
        self.live[slot as usize] = false;
        self.live_count -= 1;
        self.free.push(slot);
    }

    /// Frees every live entity.
    pub fn clear(&mut self) {
        for slot in 0..POOL_SLOTS as Slot {
            if self.live[slot as usize] {
                self.despawn(slot);
            }
        }
    }

    pub fn live(&self) -> impl Iterator<Item = (Slot, &Entity)> {
        self.slots.iter().zip(&self.live).enumerate().filter(|(_, (_, &l))| l).map(|(i, (e, _))| (i as Slot, e))
    }

    pub fn live_mut(&mut self) -> impl Iterator<Item = &mut Entity> {
        self.slots.iter_mut().zip(&self.live).filter(|(_, &l)| l).map(|(e, _)| e)
    }

    pub fn len(&self) -> usize {
        self.live_count
    }

    /// Reports how much of the backing block live entities use.
    pub fn report_usage(&self) {
        memreplay::usage(self.slots.as_ptr(), self.live_count * ENTITY_BYTES);
    }
}
