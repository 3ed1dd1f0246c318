// Package cli holds end-to-end tests of the starter CLI and the worker as a
// person runs them: separate processes, an embedded dev server, kills and
// restarts.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package cli
