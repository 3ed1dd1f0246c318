package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The worker's files inside a writable root are bound read-only, the
// directories between the root and them made mount points; those outside
// every root, or missing, are left alone. Paths are compared resolved.
func TestProtected(t *testing.T) {
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	root := filepath.Join(base, "work")
	tmp := filepath.Join(base, "tmp")
	for _, d := range []string{filepath.Join(root, ".sf", "store", "p"), filepath.Join(root, ".sf", "dev"), tmp, filepath.Join(base, "out")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "script.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, ".sf", "store"), filepath.Join(base, "store-link")); err != nil {
		t.Fatal(err)
	}
	keep, ro := protected([]string{root, tmp}, []string{
		filepath.Join(base, "store-link"),        // inside, through a link
		filepath.Join(root, ".sf", "dev"),        // inside
		filepath.Join(root, "script.json"),       // a file directly in the root
		filepath.Join(base, "out"),               // outside
		filepath.Join(root, "missing"),           // missing
		filepath.Join(root, ".sf", "store", "p"), // inside another protected path
		"",
	})
	wantRO := []string{filepath.Join(root, ".sf", "store"), filepath.Join(root, ".sf", "dev"), filepath.Join(root, "script.json"), filepath.Join(root, ".sf", "store", "p")}
	if !slices.Equal(ro, wantRO) {
		t.Errorf("read-only %q\nwant %q", ro, wantRO)
	}
	if want := []string{filepath.Join(root, ".sf")}; !slices.Equal(keep, want) {
		t.Errorf("keep %q, want %q", keep, want)
	}
}

// A helper that cannot run its command says why on the status pipe: Start
// reports an *UnavailableError and nothing ran.
func TestStartReportsTheHelpersFailure(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	cmd := exec.Command("sessionflow-no-such-program", "x")
	cmd.Args[0] = "sessionflow-no-such-program"
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	run, err := Sandbox{}.Start(cmd, Policy{Mode: WorkspaceWrite, Workspace: dir})
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || run != nil {
		t.Fatalf("Start: %v, %v; want an *UnavailableError", run, err)
	}
	if want := `the sandbox helper failed: the command's program: exec: "sessionflow-no-such-program": executable file not found in $PATH`; ue.Detail != want {
		t.Errorf("detail %q\nwant %q", ue.Detail, want)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != helperExit {
		t.Errorf("the helper's state %v, want exit %d", cmd.ProcessState, helperExit)
	}
	if out.Len() != 0 {
		t.Errorf("output %q", out.String())
	}
	// Its temporary directory is gone.
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind in %s: %v", tmp, left)
	}
}

// A confined command runs with its environment but the helper's spec, in
// the cwd, TMPDIR its private directory, and holds no descriptor but its
// standard ones (not the status pipe).
func TestStartRunsTheCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", `pwd; echo "$MARK"; env | grep -c SESSIONFLOW_SANDBOX_SPEC; test -d "$TMPDIR" && echo tmp; if [ -e /proc/$$/fd/3 ]; then echo fd3; else echo no-fd3; fi`)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	cmd.Env = append(os.Environ(), "MARK=kept")
	run, err := Sandbox{}.Start(cmd, Policy{Mode: WorkspaceWrite, Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if got, want := out.String(), real+"\nkept\n0\ntmp\nno-fd3\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if _, err := (Sandbox{}).Start(exec.Command("true"), Policy{Mode: DangerFullAccess}); err == nil {
		t.Errorf("Start ran an unconfined mode")
	}
}

// The temporary directories of a worker that died are removed by the next
// sandbox that starts a command; a live worker's are kept.
func TestSweepTempDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{
		fmt.Sprintf("sessionflow-cmd-%d-1", dead.Process.Pid): false,
		fmt.Sprintf("sessionflow-cmd-%d-2", os.Getppid()):     true,
		fmt.Sprintf("sessionflow-cmd-%d-3", os.Getpid()):      true,
		"sessionflow-cmd-x-4":                                 true,
		"other-5":                                             true,
	}
	for n := range names {
		if err := os.MkdirAll(filepath.Join(tmp, n, "inner"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepTempDirs()
	for n, kept := range names {
		if _, err := os.Stat(filepath.Join(tmp, n)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", n, err == nil, kept)
		}
	}
}
