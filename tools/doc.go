// Package tools pins the development tools of sessionflow in a module of
// their own: the Temporal CLI, whose dev server (`temporal server start-dev`)
// is the embedded server of dev mode and of the integration tests. It is a
// separate module because go.temporal.io/server does not build beside the
// go.temporal.io/sdk version of the main module; there is no go.work on
// purpose, as a workspace would merge the two build lists.
package tools
