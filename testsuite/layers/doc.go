// Package layers holds the test that keeps every arrow of the house pointing down.
//
// The house is the layering of README.md's architecture section: wire and internal/lib at the
// bottom; session; jsonl, provider and tool; activities; agent; workflows; client; the program
// wiring (internal/app, worker, cmd, bench, deploy); the tests (testsuite). The test runs
// `go list` over the module and checks every import of every sessionflow package against the
// rules table in layers_test.go, which mirrors that picture and the package docs. A change to
// the house changes the table, the README and the package docs together.
//
// The package has no code of its own; it imports nothing.
package layers
