//! What `berth status` shows of one workload object: desired vs ready replicas. Its own module
//! so that the Arc status ([`crate::backends::arm`]), which `status` prints, can hold it too.

use serde::Serialize;

/// Live replicas of one berth-managed workload object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkloadStatus {
    pub target: String,
    pub workload: String,
    /// `Deployment namespace/name`.
    pub object: String,
    pub desired: i64,
    pub ready: i64,
}
