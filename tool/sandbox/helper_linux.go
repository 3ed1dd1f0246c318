package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperExit is the exit status of a helper that did not run its command.
const helperExit = 125

// The Landlock rights the helper handles. Reading and executing are not
// handled: a command reads what the worker may read.
const (
	writeRights = llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev |
		llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeChar | llsys.AccessFSMakeDir |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock |
		llsys.AccessFSMakeSym | llsys.AccessFSRefer
	// fileRights are those a rule on a file (not a directory) may grant.
	fileRights = llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
	tcpRights  = llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	scopes     = llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal
)

// init runs the helper when this process is one (see the package doc); it
// never returns then. Any other start of the program goes on as usual.
func init() {
	if len(os.Args) < 3 || os.Args[1] != helperArg {
		return
	}
	raw, ok := os.LookupEnv(specEnv)
	if !ok {
		return
	}
	os.Exit(helper(raw, os.Args[2:]))
}

// helper confines this process and execs argv; it returns only when it
// could not, after writing why to the status pipe.
func helper(raw string, argv []string) int {
	var sp spec
	status := os.Stderr
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		fmt.Fprintf(status, "sandbox helper: unreadable spec: %v\n", err)
		return helperExit
	}
	syscall.CloseOnExec(sp.StatusFD)
	status = os.NewFile(uintptr(sp.StatusFD), "status")
	if err := confineAndExec(sp, argv); err != nil {
		fmt.Fprintf(status, "%v", err)
	}
	return helperExit
}

func confineAndExec(sp spec, argv []string) error {
	if err := bindProtected(sp.Keep, sp.Protect); err != nil {
		return err
	}
	cfg := landlock.Config{HandledAccessFS: writeRights, Scoped: scopes}
	if !sp.Network {
		cfg.HandledAccessNet = tcpRights
	}
	rules := []landlock.Rule{landlock.PathAccess(fileRights, "/dev/null")}
	for _, w := range sp.Write {
		rules = append(rules, landlock.PathAccess(writeRights, w))
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("the Landlock ruleset is empty")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("the command's program: %w", err)
	}
	env := withoutVar(os.Environ(), specEnv)
	// The rest happens on this thread, which execs: no_new_privs, the
	// Landlock domain and the capabilities are per thread until then, and
	// execve keeps this thread's. It is never unlocked.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	unix.Close(fd)
	if err := dropCapabilities(); err != nil {
		return err
	}
	err = syscall.Exec(path, argv, env)
	return fmt.Errorf("executing %s: %w", path, err)
}

// bindProtected makes each of keep a mount point and binds each of
// protect read-only onto itself, shallowest first, in this process's own
// mount namespace (which the worker created for it), after making every
// mount a slave so that nothing propagates back.
func bindProtected(keep, protect []string) error {
	if len(keep)+len(protect) == 0 {
		return nil
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	type bind struct {
		path string
		ro   bool
	}
	var binds []bind
	for _, k := range keep {
		binds = append(binds, bind{k, false})
	}
	for _, p := range protect {
		binds = append(binds, bind{p, true})
	}
	depth := func(p string) int { return strings.Count(filepath.Clean(p), string(filepath.Separator)) }
	slices.SortStableFunc(binds, func(a, b bind) int { return depth(a.path) - depth(b.path) })
	for _, b := range binds {
		if err := unix.Mount(b.path, b.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s: %w", b.path, err)
		}
		if !b.ro {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(b.path, &st); err != nil {
			return fmt.Errorf("statfs %s: %w", b.path, err)
		}
		// A remount must keep the flags a user namespace locks.
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for _, f := range []struct{ st, ms uintptr }{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
			{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if uintptr(st.Flags)&f.st != 0 {
				flags |= f.ms
			}
		}
		if err := unix.Mount("", b.path, "", flags, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", b.path, err)
		}
	}
	return nil
}

// dropCapabilities empties this thread's ambient, bounding (when it may),
// inheritable, permitted and effective capability sets: with
// no_new_privs, the command and its children gain none, even as root.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		// EPERM without CAP_SETPCAP: the permitted set, emptied below,
		// is what no_new_privs keeps the command to.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("dropping the capabilities: %w", err)
	}
	return nil
}

// lastCap is the highest capability number of this kernel.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 63
	}
	return n
}
