// Package tool holds the tools a worker offers its agents: a Registry of
// named tools with JSON Schemas, their concurrency and retry classes, and the
// built-in file and command tools confined to a session's working directory
// and its sandbox mode (run_command's commands by the kernel, package
// tool/sandbox).
//
// Executing a tool never fails: a missing tool, arguments that fail the
// schema, a path that escapes the working directory or a failing tool become
// a Result with IsError set and a clear text, so a turn records the failure
// and goes on.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3. It
// may import wire, internal/lib/... and session, and provider, whose tool
// types a model sees; not jsonl, nor anything above. mcptool is on the same
// row.
package tool

import (
	"context"
	"encoding/json"

	"github.com/sessionflow/sessionflow/provider"
)

// Error codes of results the registry itself produces.
const (
	CodeNotFound         = "TOOL_NOT_FOUND"
	CodeInvalidArguments = "INVALID_ARGUMENTS"
	CodeOutsideCwd       = "OUTSIDE_CWD"
	CodeFailed           = "TOOL_FAILED"
)

// Tool is one tool.
type Tool struct {
	// Name is the name the model calls it by.
	Name string
	// Description tells the model what it does.
	Description string
	// Schema is the JSON Schema of its arguments object.
	Schema json.RawMessage
	// Parallel marks a tool that may run beside other parallel tools of the
	// same step; other tools are exclusive (a barrier).
	Parallel bool
	// Idempotent marks a tool that may be run again when a crash left its
	// outcome unknown; any other tool is never re-run blindly.
	Idempotent bool
	// Approval marks a tool whose calls wait for the user's approval in a
	// session whose approval policy is ask, unless an allow rule matches
	// (Registry.Gate).
	Approval bool
	// Escalates marks a tool that accepts sandbox_permissions and
	// justification: a call may ask, with the user's approval, to run in a
	// wider sandbox mode. Its schema must declare the two properties.
	Escalates bool
	// Run executes one call.
	Run func(ctx context.Context, call Call) (Result, error)
}

// Call is one invocation of a tool.
type Call struct {
	// SessionID is the calling session.
	SessionID string
	// CallID is the model's id of the call.
	CallID string
	// Cwd is the session's working directory; file tools stay inside it.
	Cwd string
	// Arguments is the arguments object ({} when the model sent none).
	Arguments json.RawMessage
	// SandboxMode is the session's sandbox mode (wire.SandboxModes; ""
	// is the registry's default, BuiltinOptions.DefaultSandboxMode):
	// what run_command's commands and write_file may write.
	SandboxMode string
	// NetworkAccess lets run_command's commands open TCP connections and
	// listen in the confined modes.
	NetworkAccess bool
	// Delegation is set when the caller can start child sessions: the
	// subagent tool reads the caller's depth from it and plans the child
	// there (Subagent).
	Delegation *Delegation
}

// Result is what a call produced.
type Result struct {
	// Content is the result's content (text blocks).
	Content []provider.Block `json:"content"`
	// IsError marks a failed call.
	IsError bool `json:"isError,omitempty"`
	// Error names the failure of an IsError result.
	Error *ErrorInfo `json:"error,omitempty"`
	// Meta is a tool's private presentation payload, stored with the result.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// ErrorInfo names a failure, as stored in a tool/result's error field.
type ErrorInfo struct {
	// Name is the error's name, e.g. "ToolNotFoundError".
	Name string `json:"name"`
	// Code is one of the Code* constants or a tool's own code.
	Code string `json:"code"`
	// Reason is an optional detail.
	Reason string `json:"reason,omitempty"`
}
