// Package sandbox confines the commands run_command runs: what a command
// may write and whether it may use TCP, enforced by the kernel in a helper
// process, so that neither the model nor the command can switch it off.
//
// # How
//
// The worker never restricts itself. For each confined command it starts
// a helper: its own executable (/proc/self/exe) again, with argv[1]
// helperArg and the policy in the environment. This package's init
// function recognises that start before the program's main runs (every
// binary that links package tool carries it: the worker, the crashworker,
// test binaries, an embedding application), and in that process, which
// runs nothing else:
//
//  1. when the worker's own files lie inside a writable root (the store
//     root under the cwd, as `worker --dev` makes it), it makes them
//     read-only bind mounts, and their directories between the root and
//     them mount points (a mount point cannot be renamed or removed), in
//     a mount namespace of its own that the worker created for it (with a
//     user namespace mapping only the worker's ids when the worker is not
//     root, the helper keeping that namespace's CAP_SYS_ADMIN across its
//     exec as an ambient capability);
//  2. it builds a Landlock ruleset (github.com/landlock-lsm/go-landlock)
//     that handles every write right (write, truncate, create, remove,
//     link and rename across directories, device ioctls) and grants them
//     under the writable roots and on /dev/null only, handles TCP bind
//     and connect and grants neither unless the session allows the
//     network, and scopes signals and abstract unix sockets to the
//     sandbox; reads and execution are not handled, so a command reads
//     what the worker may read;
//  3. on one locked OS thread, the one that execs, it sets no_new_privs,
//     enforces the ruleset, drops every capability (ambient, bounding set,
//     inheritable, permitted, effective: a worker running as root runs its
//     commands as a root without capabilities), and execs sh -c COMMAND.
//
// A failure of any step is written to a status pipe (close-on-exec: the
// command never holds it) and the helper exits without running the
// command: the worker reports SANDBOX_UNAVAILABLE.
// The Landlock domain, no_new_privs and the dropped capabilities are
// inherited by every process the command starts, including those that
// leave its process group or session and outlive it.
//
// The writable roots of workspace-write are the session's cwd and a
// directory the worker creates for the one call (mode 0700, TMPDIR points
// to it, removed when the call ends). read-only grants only /dev/null.
// The package's tests are in package tool too (tool/sandbox_test.go): the
// escapes tried through run_command.
//
// # Fails closed
//
// The confined modes need Landlock ABI 6 (Linux 6.12; the signal-scoping
// erratum fixed): filesystem rights through ABI 5, TCP through ABI 4,
// scoping through ABI 6. On a kernel without Landlock, with an older ABI,
// on another OS, or when the helper fails (the mount namespace cannot be
// made, a ruleset is refused), the command does not run; only
// danger-full-access runs a command unconfined.
//
// # What Landlock does not cover, and what does
//
//   - Other processes' files through /proc/<pid>/{cwd,root,fd}: the paths
//     resolve to the files they name, which Landlock checks as any other
//     path; and Landlock denies ptrace-mode access (which /proc/<pid>/cwd
//     and its kin require) to any process outside the sandbox's domain.
//   - Signals to the worker or any process outside the sandbox, and
//     connections to abstract unix sockets bound outside it: Landlock's
//     scoping (ABI 6).
//   - Setuid and file-capability binaries: no_new_privs (they run without
//     gaining their owner's rights or capabilities), and the emptied
//     capability sets for a worker running as root.
//   - Mounting, unmounting, pivot_root: refused by Landlock to a sandboxed
//     process (and by the dropped capabilities).
//   - Writing into the worker's own files (store root, dev server state,
//     its executable, BuiltinOptions.Deny) when they lie inside a writable
//     root: Landlock cannot carve a subtree out of a granted one; the
//     read-only bind mounts of step 1 do. One that does not exist when
//     the command starts is not protected.
//   - The terminal: the command runs in a new session without a
//     controlling terminal (no TIOCSTI into the worker's terminal).
//
// Not covered, by this package or the kernel's Landlock ABI 7:
//
//   - UDP, ICMP, raw and Multipath TCP sockets, and connections to
//     pathname unix sockets (a Docker or D-Bus socket is reachable when
//     its permissions let the worker's user in). Landlock ABI 9 handles
//     pathname unix sockets and ABI 10 UDP; a seccomp filter on socket(2)
//     or a network namespace would cover the rest; none is used here.
//   - Reading: every mode reads what the worker may read, other sessions'
//     logs included (the file tools refuse those; a command does not).
//   - Resources: CPU, memory, disk space and process count are not
//     limited (cgroups would), beyond the command's timeout.
//   - A hard link that already exists inside a writable root to a file
//     outside it (made before, not by a confined command: creating one is
//     refused) is written through, as Landlock checks paths.
//   - MCP tools run in their servers' processes, not here.
//   - A worker killed with SIGKILL leaves its commands' temporary
//     directories (sessionflow-cmd-<pid>-*) behind until the next worker
//     process on the host starts a confined command and removes those of
//     dead pids.
//
// Layering: package tool's (row 3); it imports wire only.
package sandbox

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/wire"
)

// Mode is a session's sandbox mode, as wire.SandboxModes name them.
type Mode string

// The modes.
const (
	ReadOnly         Mode = wire.SandboxReadOnly
	WorkspaceWrite   Mode = wire.SandboxWorkspaceWrite
	DangerFullAccess Mode = wire.SandboxDangerFullAccess
)

// MinABI is the Landlock ABI version the confined modes need.
const MinABI = 6

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return slices.Contains(wire.SandboxModes, string(m)) }

// Confined reports whether commands run under m are confined.
func (m Mode) Confined() bool { return m == ReadOnly || m == WorkspaceWrite }

// ErrUnavailable marks a confined command that was not run because the
// sandbox cannot be enforced here.
var ErrUnavailable = errors.New("sandbox unavailable")

// UnavailableError is the error of a command refused for want of the
// sandbox; it wraps ErrUnavailable.
type UnavailableError struct {
	// Mode is the mode asked for.
	Mode Mode
	// Detail says what is missing.
	Detail string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox mode %q is requested but the sandbox cannot be enforced on this host: %s; "+
		"refusing to run the command unconfined (a session whose agentOptions.sandboxMode is %q runs commands unconfined)",
		e.Mode, e.Detail, DangerFullAccess)
}

// Unwrap returns ErrUnavailable.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// Policy is what one confined command may do.
type Policy struct {
	// Mode is ReadOnly or WorkspaceWrite.
	Mode Mode
	// Network lets the command bind and connect TCP sockets.
	Network bool
	// Workspace is the writable root of WorkspaceWrite: the session's
	// cwd, absolute.
	Workspace string
	// Protect are paths that stay read-only whatever the mode: the
	// worker's own files. Those inside a writable root are bound
	// read-only; those outside are not writable anyway.
	Protect []string
}

// Sandbox starts confined commands. The zero value probes the running
// kernel.
type Sandbox struct {
	// ABI, when set, replaces the probe of the kernel's Landlock ABI
	// version (0: no Landlock), so that a test sees what a host without
	// it does.
	ABI func() int
}

// abi returns the Landlock ABI version in force.
func (s Sandbox) abi() int {
	if s.ABI != nil {
		return s.ABI()
	}
	return kernelABI()
}

// Check returns an *UnavailableError when commands cannot be confined
// under mode here, and nil when they can or mode is not confined.
func (s Sandbox) Check(mode Mode) error {
	if !mode.Confined() {
		return nil
	}
	switch v := s.abi(); {
	case !supported:
		return &UnavailableError{Mode: mode, Detail: "Landlock is a Linux facility and this is not Linux"}
	case v <= 0:
		return &UnavailableError{Mode: mode, Detail: fmt.Sprintf("this kernel has no Landlock "+
			"(Linux 6.12 or later with Landlock enabled at boot, lsm=landlock, gives the ABI %d the sandbox needs)", MinABI)}
	case v < MinABI:
		return &UnavailableError{Mode: mode, Detail: fmt.Sprintf("this kernel's Landlock ABI is %d and the sandbox needs %d "+
			"(Linux 6.12 or later): file writes, TCP, and the scoping of signals and abstract unix sockets", v, MinABI)}
	}
	return nil
}
