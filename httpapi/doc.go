// Package httpapi serves the session API over HTTP (docs/API.md, "HTTP
// API"; the route contract is httpapi/openapi.yaml, embedded and served at
// GET /v1/openapi.yaml): the sessions of a store root with their state, a
// session's stored events as JSON lines or as Server-Sent Events that keep
// following the log, the live text of the running model call (package
// livetext, read from the store's session directory), and the control calls (followup, steer, inject,
// cancel, approvals, permissions, compact, dispose) passed to the session
// workflows' Temporal updates through package client.
//
// The store is read only: sessions are listed with jsonl.Store.Rows and
// read through read handles (jsonl.Store.Open with jsonl.AccessRead), so a
// zstd log is read whole, every frame joined, as `starter log cat` reads
// it. No request path reaches the filesystem except through the store's id
// lookup: a session id from a path goes to the store, which encodes it
// into one directory name below the root; a path with a "." or ".."
// segment, a control character or an id longer than the store's limit is
// refused before anything is read.
//
// A bearer token, when set, is required on every request (compared in
// constant time); Listen refuses a non-loopback address without one.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// beside the program wiring. Its production code may import wire,
// internal/lib/..., session, jsonl/..., livetext and client; only programs (the
// worker, cmd/starter, internal/app/...) and tests import it.
package httpapi
