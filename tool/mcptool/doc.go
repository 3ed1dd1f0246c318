// Package mcptool offers the tools of Model Context Protocol servers as
// tool.Tools, over the official MCP Go SDK.
//
// A Bridge connects to each configured server (a stdio command, or a
// streamable HTTP URL), lists its tools and turns each into a tool.Tool:
//
//   - Name is "<server>__<tool>", the tool's characters outside
//     [a-zA-Z0-9_-] replaced by '_'. Every MCP tool is prefixed, whatever the
//     other servers offer, so a name stored in a session log resolves to the
//     same tool after the configuration gains a server. A name longer than 64
//     characters, or one that two tools share, is refused with
//     ErrNameCollision or ErrInvalidName when the bridge starts.
//   - Description is the tool's description (its title when it has none).
//   - Schema is its input schema.
//   - Parallel and Idempotent come from its annotations: readOnlyHint makes
//     it parallel-safe and idempotent; idempotentHint alone makes it
//     idempotent and exclusive; destructiveHint and openWorldHint change
//     nothing (a tool that is neither read-only nor idempotent is exclusive
//     and never re-run blindly, destructive or not). A server configured with
//     ignoreAnnotations gets exclusive, non-idempotent tools throughout.
//   - Run sends tools/call with the call's arguments and maps the result:
//     text content as text, images, audio, resource links and binary
//     resources as a short bracketed description, an embedded text resource
//     as its text, and isError as an IsError result with code TOOL_FAILED.
//
// A server that exits or whose connection drops is restarted with a growing
// delay; a call in flight at that moment fails with an error that wraps
// ErrServerExited (the registry makes it a TOOL_FAILED result), and the next
// call waits for the new connection. After Options.MaxRestarts restarts in a
// row without a connection that lasted Options.StableAfter, the server is
// down: it is no longer restarted on its own, and each later call makes one
// connection attempt and fails with ErrServerDown when that fails too.
// Cancelling a call's context cancels the request on the server
// (notifications/cancelled). Close stops every server.
//
// The tools are listed once, at Start: a restarted server is expected to
// offer the same tools, and a tool it no longer offers fails its calls with
// the server's error (list-changed notifications are not followed).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3, with
// tool: it may import tool, provider, wire, internal/lib/... and session, and
// nothing above.
package mcptool
