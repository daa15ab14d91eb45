//! VMA (`vmaBuildStatsString`) and D3D12MA (`BuildStatsString`) JSON dumps read into a
//! [`super::GpuView`]. (Owned by the dump-import work.)
