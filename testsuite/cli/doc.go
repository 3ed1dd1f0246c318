// Package cli holds end-to-end tests of the starter CLI and the worker as a
// person runs them: separate processes, an embedded dev server, kills and
// restarts.
package cli
