package tool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/tool"
)

// deniedSandbox is a cwd holding the worker's state the way `worker --dev`
// run in it leaves it: .sessionflow/store (a session's log and its lease)
// and .sessionflow/dev, both denied, beside the project's own files.
type deniedSandbox struct {
	*sandbox
	log, lock, devDB, script string
}

func newDeniedSandbox(t *testing.T, opts tool.BuiltinOptions) *deniedSandbox {
	t.Helper()
	parent := t.TempDir()
	cwd := filepath.Join(parent, "work")
	store := filepath.Join(cwd, ".sessionflow", "store")
	dev := filepath.Join(cwd, ".sessionflow", "dev")
	d := &deniedSandbox{
		log:    filepath.Join(store, "proj", "other.jsonl"),
		lock:   filepath.Join(store, "proj", "other.lock"),
		devDB:  filepath.Join(dev, "temporal.db"),
		script: filepath.Join(cwd, "script.json"),
	}
	writeFile(t, d.log, "{\"seq\":0}\n")
	writeFile(t, d.lock, "owner\n")
	writeFile(t, d.devDB, "sqlite\n")
	writeFile(t, d.script, "{}\n")
	writeFile(t, filepath.Join(cwd, "mine.txt"), "mine\n")
	// The worker names the store through a symbolic link, relative to its
	// own directory: the tools compare what the paths resolve to.
	if err := os.Symlink(store, filepath.Join(parent, "store-link")); err != nil {
		t.Fatal(err)
	}
	opts.Deny = []string{filepath.Join(parent, "store-link"), dev, d.script}
	reg, err := tool.NewRegistry(tool.Builtins(opts)...)
	if err != nil {
		t.Fatal(err)
	}
	d.sandbox = &sandbox{parent: parent, cwd: cwd, reg: reg}
	return d
}

func TestFileToolsNeverReachDeniedPaths(t *testing.T) {
	s := newDeniedSandbox(t, tool.BuiltinOptions{})
	for name, target := range map[string]string{
		"store-alias": ".sessionflow/store",      // a link to the store
		"proj-alias":  ".sessionflow/store/proj", // a link into it
		"log-alias":   ".sessionflow/store/proj/other.jsonl",
		"dev-alias":   ".sessionflow/dev",
	} {
		if err := os.Symlink(target, filepath.Join(s.cwd, name)); err != nil {
			t.Fatal(err)
		}
	}
	spellings := []string{
		".sessionflow/store/proj/other.jsonl",
		"./.sessionflow/store/proj/other.jsonl",
		"mine/../.sessionflow/store/proj/other.jsonl",
		".sessionflow/dev/../store/proj/other.jsonl",
		filepath.Join(s.cwd, ".sessionflow/store/proj/other.jsonl"),
		".SessionFlow/Store/proj/other.jsonl",
		"store-alias/proj/other.jsonl",
		"proj-alias/other.jsonl",
		"log-alias",
		".sessionflow/store/proj/other.lock",
		".sessionflow/dev/temporal.db",
		"dev-alias/temporal.db",
		"script.json",
	}
	for _, p := range spellings {
		t.Run("read "+p, func(t *testing.T) {
			text := wantError(t, s.run(t, "read_file", map[string]any{"path": p}), "PathDeniedError", "PATH_DENIED")
			want := `Error: path denied: "` + p + `" is reserved by the worker (its session store, server state or own files), which tools never reach`
			if text != want {
				t.Errorf("text %q\nwant %q", text, want)
			}
		})
		t.Run("write "+p, func(t *testing.T) {
			wantError(t, s.run(t, "write_file", map[string]any{"path": p, "content": "pwned"}), "PathDeniedError", "PATH_DENIED")
		})
	}
	for _, p := range []string{".sessionflow/store", ".sessionflow/store/proj", "store-alias", "proj-alias", ".sessionflow/dev", "dev-alias", ".SESSIONFLOW/STORE"} {
		t.Run("list "+p, func(t *testing.T) {
			wantError(t, s.run(t, "list_dir", map[string]any{"path": p}), "PathDeniedError", "PATH_DENIED")
		})
	}
	// New files inside a denied directory are refused too, and not created.
	wantError(t, s.run(t, "write_file", map[string]any{"path": ".sessionflow/store/proj2/new.jsonl", "content": "x"}), "PathDeniedError", "PATH_DENIED")
	if _, err := os.Stat(filepath.Join(s.cwd, ".sessionflow/store/proj2")); !os.IsNotExist(err) {
		t.Errorf("write_file created a directory in the store: %v", err)
	}
	for p, want := range map[string]string{s.log: "{\"seq\":0}\n", s.lock: "owner\n", s.devDB: "sqlite\n", s.script: "{}\n"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s changed: %q %v", p, b, err)
		}
	}

	// The rest of the cwd is the model's: the listings mark what is denied.
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{})); got != strings.Join([]string{
		".sessionflow/",
		"dev-alias (denied: reserved by the worker)",
		"log-alias (denied: reserved by the worker)",
		"mine.txt",
		"proj-alias (denied: reserved by the worker)",
		"script.json (denied: reserved by the worker)",
		"store-alias (denied: reserved by the worker)",
	}, "\n") {
		t.Errorf("list .: %q", got)
	}
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{"path": ".sessionflow"})); got != "dev/ (denied: reserved by the worker)\nstore/ (denied: reserved by the worker)" {
		t.Errorf("list .sessionflow: %q", got)
	}
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "mine.txt"})); got != "mine\n" {
		t.Errorf("mine.txt: %q", got)
	}
	wantOK(t, s.run(t, "write_file", map[string]any{"path": ".sessionflow/notes.txt", "content": "ok"}))
}

// A session whose cwd lies inside a denied directory reaches nothing, not
// even with run_command.
func TestToolsRefuseACwdInsideADeniedPath(t *testing.T) {
	s := newDeniedSandbox(t, tool.BuiltinOptions{RunCommand: true})
	s.cwd = filepath.Join(s.cwd, ".sessionflow", "store", "proj")
	wantError(t, s.run(t, "list_dir", map[string]any{}), "PathDeniedError", "PATH_DENIED")
	wantError(t, s.run(t, "read_file", map[string]any{"path": "other.jsonl"}), "PathDeniedError", "PATH_DENIED")
	wantError(t, s.run(t, "write_file", map[string]any{"path": "other.jsonl", "content": "x"}), "PathDeniedError", "PATH_DENIED")
	wantError(t, s.run(t, "run_command", map[string]any{"command": "echo x > other.jsonl"}), "PathDeniedError", "PATH_DENIED")
	if b, err := os.ReadFile(s.log); err != nil || string(b) != "{\"seq\":0}\n" {
		t.Errorf("the log changed: %q %v", b, err)
	}
}

// A missing cwd is reported as such, not as a denied or unresolvable path.
func TestDeniedToolsWithAMissingCwd(t *testing.T) {
	s := newDeniedSandbox(t, tool.BuiltinOptions{RunCommand: true})
	s.cwd = filepath.Join(s.parent, "gone")
	text := wantError(t, s.run(t, "run_command", map[string]any{"command": "true"}), "ToolFailedError", "TOOL_FAILED")
	if !strings.HasPrefix(text, `Error: tool "run_command" failed: the working directory "`+s.cwd+`" is unusable: `) {
		t.Errorf("text %q", text)
	}
	text = wantError(t, s.run(t, "read_file", map[string]any{"path": "a.txt"}), "ToolFailedError", "TOOL_FAILED")
	if !strings.Contains(text, "cannot open the working directory") {
		t.Errorf("text %q", text)
	}
}

// write_file replaces a file by rename: over a hard link to a denied file
// (which the file tools cannot make) it writes a new file and leaves the
// denied one as it was.
func TestWriteFileNeverWritesThroughAHardLink(t *testing.T) {
	s := newDeniedSandbox(t, tool.BuiltinOptions{})
	if err := os.Link(s.log, filepath.Join(s.cwd, "hard")); err != nil {
		t.Fatal(err)
	}
	wantOK(t, s.run(t, "write_file", map[string]any{"path": "hard", "content": "pwned"}))
	if b, err := os.ReadFile(s.log); err != nil || string(b) != "{\"seq\":0}\n" {
		t.Errorf("the log changed through a hard link: %q %v", b, err)
	}
}
