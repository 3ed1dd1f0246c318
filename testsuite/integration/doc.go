// Package integration holds sessionflow's end-to-end tests against a real
// Temporal server: the workflows run on in-process workers (the worker
// process's own code, internal/app/workerapp) with the real store activities,
// and every workflow task replays the whole history because the sticky
// workflow cache is disabled.
//
// TestMain starts one ephemeral Temporal CLI dev server for the package
// unless TEMPORAL_ADDRESS names another server (TEMPORAL_NAMESPACE and the
// other TEMPORAL_* settings of the temporal CLI then apply). Continue-as-new
// needs a server started with a small history limit, so the tests that
// force it share a second, local dev server started on first use.
//
// TestRecordHistories runs every lifecycle path and compares the command
// sequence of each fresh history with the committed fixture in
// ../histories; with -record it writes the fixtures instead:
//
//	go test ./testsuite/integration -run TestRecordHistories -record
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package integration
