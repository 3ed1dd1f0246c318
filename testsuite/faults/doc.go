// Package faults runs sessionflow's lifecycle under a real Temporal server
// with the store's filesystem failing at chosen operations (jsonl/faultfs):
// ENOSPC on the fsync of a live append and of a create's first
// materialization, EIO on the read of a resume, EACCES on a create, and a
// crash of the worker's filesystem in the middle of an append. Each test
// asserts the state the lifecycle documents (docs/API.md), the error the
// client sees, and that the log holds exactly the acknowledged events.
//
// TestMain starts one ephemeral Temporal CLI dev server for the package
// unless TEMPORAL_ADDRESS names another server. Every test runs its own
// in-process workers (internal/app/workerapp) on its own task queue and store
// root, with the sticky workflow cache disabled so every workflow task
// replays its history.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package faults
