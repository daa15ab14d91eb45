//! The block map: each block of a sub-allocating domain drawn to scale with its
//! sub-allocations, and its fragmentation figures. (Owned by the block-map work.)
