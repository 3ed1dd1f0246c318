// Package wire declares the names and small types that travel between the
// store, the workflows and their clients: search-attribute names, workflow-id
// prefixes, handle references, lease owners and the store's error codes.
// Workflow histories and client requests carry them, so their values and
// JSON field names never change. The package imports nothing of the module,
// so the workflows need not import the store to speak of a handle.
package wire
