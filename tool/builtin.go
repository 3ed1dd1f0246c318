package tool

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionflow/sessionflow/tool/sandbox"
	"github.com/sessionflow/sessionflow/wire"
)

// Defaults of BuiltinOptions.
const (
	// DefaultMaxOutputBytes caps the text a built-in tool returns.
	DefaultMaxOutputBytes = 256 << 10
	// DefaultCommandTimeout bounds a run_command call without timeoutMs.
	DefaultCommandTimeout = 2 * time.Minute
	// maxListEntries caps the entries list_dir shows.
	maxListEntries = 1000
)

// Names of the built-in tools.
const (
	ReadFileName   = "read_file"
	ListDirName    = "list_dir"
	WriteFileName  = "write_file"
	RunCommandName = "run_command"
)

// BuiltinOptions configures the built-in tools.
type BuiltinOptions struct {
	// RunCommand enables run_command, which runs shell commands in the
	// session's working directory, confined by the call's sandbox mode
	// (package tool/sandbox).
	RunCommand bool
	// DefaultSandboxMode is the mode of a call whose SandboxMode is ""
	// (wire.DefaultSandboxMode when empty).
	DefaultSandboxMode string
	// Sandbox confines run_command's commands; its zero value probes the
	// running kernel.
	Sandbox sandbox.Sandbox
	// CommandTimeout bounds a run_command call that sets no timeoutMs
	// (DefaultCommandTimeout when zero).
	CommandTimeout time.Duration
	// MaxOutputBytes caps the text a built-in tool returns
	// (DefaultMaxOutputBytes when zero).
	MaxOutputBytes int
	// Deny are paths (directories or files) the file tools never reach
	// whatever the cwd and the path's spelling, and run_command refuses to
	// run in: the worker's session store, its dev server's state and its
	// own files (PATH_DENIED; docs/API.md "Tools", DECISIONS.md D69).
	// Relative paths are taken from the worker's working directory.
	Deny []string
}

func (o BuiltinOptions) withDefaults() BuiltinOptions {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return o
}

// Codes and names of the sandbox's refusals (docs/API.md "Sandbox").
const (
	// CodeSandboxUnavailable: the call's mode confines commands and the
	// sandbox cannot be enforced here; the command did not run.
	CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"
	// CodeSandboxDenied: a file tool's write refused by the call's mode
	// (read-only), as the harness's FS_SANDBOX_DENIED.
	CodeSandboxDenied = "FS_SANDBOX_DENIED"
	// NameSandboxUnavailable and NameSandboxDenied are their ErrorInfo
	// names.
	NameSandboxUnavailable = "SandboxUnavailableError"
	NameSandboxDenied      = "SandboxDeniedError"
)

// sandboxMode returns the mode of call: its own, else the default.
func (o BuiltinOptions) sandboxMode(call Call) (sandbox.Mode, error) {
	m := call.SandboxMode
	if m == "" {
		m = o.DefaultSandboxMode
	}
	if m == "" {
		m = wire.DefaultSandboxMode
	}
	if mode := sandbox.Mode(m); mode.Valid() {
		return mode, nil
	}
	return "", fmt.Errorf("unknown sandbox mode %q (want %q, %q or %q)", m, wire.SandboxReadOnly, wire.SandboxWorkspaceWrite, wire.SandboxDangerFullAccess)
}

// Builtins returns the built-in tools: read_file, list_dir and write_file,
// confined to the call's working directory through os.Root (no "..", no
// absolute path outside it, no symbolic link leading out) and kept out of
// opts.Deny, and run_command when opts.RunCommand is set.
func Builtins(opts BuiltinOptions) []Tool {
	opts = opts.withDefaults()
	deny := newDenyList(opts.Deny)
	tools := []Tool{readFileTool(opts, deny), listDirTool(opts, deny), writeFileTool(opts, deny)}
	if opts.RunCommand {
		tools = append(tools, runCommandTool(opts, deny))
	}
	return tools
}

// decodeArgs decodes a call's arguments into v; Run functions are called
// after the registry validated them, so a failure here is a direct call with
// bad arguments.
func decodeArgs(call Call, v any) error {
	raw := call.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// meta marshals a result's Meta.
func meta(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
