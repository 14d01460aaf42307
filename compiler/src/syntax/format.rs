//! The canonical formatter (`berth fmt`): comments kept, idempotent.
