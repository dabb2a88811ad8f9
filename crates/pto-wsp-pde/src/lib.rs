//! Plan-Descriptor-Execute (the PDE specification): the second programming model beside
//! workload–schedule. The host *plans* from metadata only (here: [`plan_kv_chunk`], FlashInfer's
//! split-KV chunk search), a generator on one control thread walks an iteration [`Space`] and emits
//! small fixed-size [`Descriptor`]s ([`Descriptor::BYTES`] = 36 bytes) into a bounded queue, and N
//! dispatch threads run the kernel of the tier each descriptor names ([`Launch`]); kernels read
//! their descriptor's fields as scalars. [`schedule`] holds what is built of the declarative
//! schedule (`order` as the walk order, `affinity` as dispatch placement; `prefetch` is
//! [`Emitter::prefetch`]). [`decode`] is the flagship: variable-length GQA decode attention with
//! split-KV partials in planned workspace and a merge.
//!
//! ```
//! use pto_wsp_pde::{Descriptor, End, Launch, Space, Tier, Tiers, select_tier};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let space = Space::new("rows").axis("row", 0, End::Dynamic).bind(&[("row", 10)], &[])?;
//! let tiers = Tiers::new("t", vec![Tier::upto("small", 4, 0), Tier::default_tier("big", 0)])?;
//! let sum = AtomicU64::new(0);
//! let add = |d: &Descriptor| {
//!     sum.fetch_add(u64::from(d.indices[0]), Ordering::Relaxed);
//!     Ok(())
//! };
//! let stats = Launch::new(&space, &tiers)
//!     .kernel("small", &add)
//!     .kernel("big", &add)
//!     .dispatch_threads(2)
//!     .run(|e| {
//!         for r in 0..10 {
//!             if r % 2 == 1 {
//!                 continue;
//!             }
//!             let tier = select_tier(e.tiers(), r);
//!             e.emit(Descriptor { tier, indices: [r, 0, 0], ..Descriptor::default() })?;
//!         }
//!         Ok(())
//!     })?;
//! assert_eq!(stats.descriptors, 5);
//! assert_eq!(sum.load(Ordering::Relaxed), 0 + 2 + 4 + 6 + 8);
//! # Ok::<(), pto_wsp_pde::PdeError>(())
//! ```
//!
//! What is built and what is not is in `docs/PDE.md`; how the planner compares with FlashInfer's
//! is in [`planner`].

pub mod buffer;
pub mod decode;
pub mod descriptor;
pub mod dispatch;
pub mod error;
pub mod generate;
pub mod planner;
pub mod schedule;
pub mod space;
pub mod tier;

pub use buffer::Buffer;
pub use descriptor::{Descriptor, Field, Layout, MAX_AXES, MAX_USER, NO_WORKSPACE, PREFETCH_TIER};
pub use dispatch::{Admit, Kernel, Launch, LaunchStats};
pub use error::{PdeError, Result};
pub use generate::{Emitter, MAX_PREFETCH_AXIS, Sink, generate_vec};
pub use planner::{KvPlan, PlanOptions, blocks_for, plan_kv_chunk};
pub use schedule::{Affinity, Order, walk};
pub use space::{Axis, BoundAxis, BoundSpace, End, Space, Tile};
pub use tier::{Tier, Tiers, select_tier};
