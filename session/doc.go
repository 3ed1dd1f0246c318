// Package session holds sessionflow's event model: the event envelope and the
// session header of format version 3, the event-type vocabulary, typed payload
// accessors for the events that crash repair reads, the lossless-JSON rule,
// turn and step numbering helpers, the synthesis of interrupted-turn closers
// and the rules of the session/end-seed marker.
//
// Everything here is pure: no I/O, no clocks, no randomness. The store
// (package jsonl) and the Temporal workflows build on these values.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 2 of the
// house. It may import wire and internal/lib/..., and no other sessionflow
// package; every package above may import it.
package session
