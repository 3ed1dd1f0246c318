package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// supported reports that this OS has Landlock.
const supported = true

// helperArg is argv[1] of a helper process; specEnv holds its spec. Both
// are needed: a program started with one of them only runs as usual.
const (
	helperArg = "sessionflow-sandbox-helper"
	specEnv   = "SESSIONFLOW_SANDBOX_SPEC"
)

// spec is what the worker tells a helper.
type spec struct {
	// StatusFD is the write end of the status pipe.
	StatusFD int `json:"statusFd"`
	// Network lets the command use TCP.
	Network bool `json:"network,omitempty"`
	// Write are the writable roots (resolved).
	Write []string `json:"write,omitempty"`
	// Keep are directories made mount points (they cannot be renamed or
	// removed), Protect the paths bound read-only.
	Keep    []string `json:"keep,omitempty"`
	Protect []string `json:"protect,omitempty"`
}

// kernelABI returns the running kernel's Landlock ABI version, 0 without
// Landlock. An ABI of 6 or more whose signal-scoping erratum is not fixed
// counts as 5, as go-landlock counts it.
func kernelABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	if v >= 6 {
		if errata, err := llsys.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	return v
}

// Run is a confined command Start started.
type Run struct {
	tmp string
}

// Close removes the command's private temporary directory. Call it when
// the command and every process it started are gone.
func (r *Run) Close() error {
	if r == nil || r.tmp == "" {
		return nil
	}
	return os.RemoveAll(r.tmp)
}

// Start starts cmd confined by p, as cmd.Start does, and returns when the
// command runs: cmd's Path and Args name the command (Args[0] is looked up
// in PATH by the helper), its Env (nil: the worker's) gets TMPDIR in
// workspace-write, its SysProcAttr is replaced (a new session, without a
// controlling terminal; the namespaces step 1 of the package doc needs)
// and ExtraFiles must be empty. When the sandbox cannot be enforced it
// returns an *UnavailableError and nothing ran: the helper, if it
// started, has been waited for. Another error is cmd.Start's.
func (s Sandbox) Start(cmd *exec.Cmd, p Policy) (*Run, error) {
	if err := s.Check(p.Mode); err != nil {
		return nil, err
	}
	if !p.Mode.Confined() {
		return nil, fmt.Errorf("sandbox: mode %q is not a confined mode", p.Mode)
	}
	if len(cmd.ExtraFiles) > 0 {
		return nil, errors.New("sandbox: the command must have no ExtraFiles")
	}
	unavailable := func(format string, args ...any) error {
		return &UnavailableError{Mode: p.Mode, Detail: fmt.Sprintf(format, args...)}
	}
	sp := spec{StatusFD: 3, Network: p.Network}
	run := &Run{}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if p.Mode == WorkspaceWrite {
		ws, err := filepath.EvalSymlinks(p.Workspace)
		if err != nil {
			return nil, fmt.Errorf("the working directory %q: %w", p.Workspace, err)
		}
		sweepOnce.Do(sweepTempDirs)
		tmp, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
		if err != nil {
			return nil, unavailable("cannot create the command's temporary directory: %v", err)
		}
		run.tmp = tmp
		if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
			_ = run.Close()
			return nil, unavailable("cannot resolve the command's temporary directory: %v", err)
		}
		sp.Write = []string{ws, tmp}
		env = append(withoutVar(env, "TMPDIR"), "TMPDIR="+tmp)
		sp.Keep, sp.Protect = protected(sp.Write, p.Protect)
	}
	fail := func(err error) (*Run, error) {
		_ = run.Close()
		return nil, err
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return fail(err)
	}
	argv := append([]string{"/proc/self/exe", helperArg}, cmd.Args...)
	// The helper looks the program up, in the command's PATH.
	cmd.Path, cmd.Args, cmd.Err = "/proc/self/exe", argv, nil
	cmd.Env = append(withoutVar(env, specEnv), specEnv+"="+string(b))
	attr := &syscall.SysProcAttr{Setsid: true}
	if len(sp.Protect) > 0 {
		attr.Cloneflags = syscall.CLONE_NEWNS
		if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
			attr.Cloneflags |= syscall.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			// The helper keeps the namespace's CAP_SYS_ADMIN across its
			// exec to mount; it drops every capability before the
			// command's.
			attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
		}
	}
	cmd.SysProcAttr = attr
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		if attr.Cloneflags != 0 && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS)) {
			return fail(unavailable("cannot create the mount namespace that keeps the worker's files read-only: %v", err))
		}
		return fail(err)
	}
	// The helper closes its end when it execs the command (close-on-exec)
	// or writes why it could not before it exits.
	msg, _ := io.ReadAll(io.LimitReader(r, 4096))
	if len(msg) > 0 {
		_ = cmd.Wait()
		return fail(unavailable("the sandbox helper failed: %s", strings.TrimSpace(string(msg))))
	}
	return run, nil
}

// tempPrefix starts the name of a command's temporary directory, which
// goes on with the worker's pid: sessionflow-cmd-<pid>-<random>.
const tempPrefix = "sessionflow-cmd-"

var sweepOnce sync.Once

// sweepTempDirs removes the temporary directories a worker killed while
// its commands ran left behind: those whose pid names no live process.
func sweepTempDirs() {
	dir := os.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// protected returns the paths of protect (resolved) that lie inside a
// writable root, and the directories between that root and them.
func protected(roots, protect []string) (keep, ro []string) {
	for _, p := range protect {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			// Missing: nothing to protect (see the package doc).
			continue
		}
		for _, root := range roots {
			rel, err := filepath.Rel(root, real)
			if err != nil || !filepath.IsLocal(rel) && rel != "." {
				continue
			}
			if !slices.Contains(ro, real) {
				ro = append(ro, real)
			}
			for d := filepath.Dir(real); d != root && strings.HasPrefix(d, root+string(filepath.Separator)); d = filepath.Dir(d) {
				if !slices.Contains(keep, d) {
					keep = append(keep, d)
				}
			}
		}
	}
	keep = slices.DeleteFunc(keep, func(d string) bool { return slices.Contains(ro, d) })
	return keep, ro
}

// withoutVar returns env without name's entries.
func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
