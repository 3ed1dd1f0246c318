package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessionflow/sessionflow/tool"
)

// sandbox is a parent directory holding the session's cwd ("work") and a
// file outside it ("secret.txt"), so escapes have something to reach.
type sandbox struct {
	parent, cwd, secret string
	reg                 *tool.Registry
}

func newSandbox(t *testing.T, opts tool.BuiltinOptions) *sandbox {
	t.Helper()
	parent := t.TempDir()
	cwd := filepath.Join(parent, "work")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(parent, "secret.txt")
	writeFile(t, secret, "top secret\n")
	if err := os.Mkdir(filepath.Join(parent, "outdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(parent, "outdir", "inner.txt"), "outside inner\n")
	reg, err := tool.NewRegistry(tool.Builtins(opts)...)
	if err != nil {
		t.Fatal(err)
	}
	return &sandbox{parent: parent, cwd: cwd, secret: secret, reg: reg}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *sandbox) run(t *testing.T, name string, args any) tool.Result {
	t.Helper()
	return s.runCtx(t, context.Background(), name, args)
}

func (s *sandbox) runCtx(t *testing.T, ctx context.Context, name string, args any) tool.Result {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return s.reg.Execute(ctx, name, tool.Call{SessionID: "s", CallID: "c", Cwd: s.cwd, Arguments: b})
}

func wantOK(t *testing.T, r tool.Result) string {
	t.Helper()
	if r.IsError || r.Error != nil {
		t.Fatalf("unexpected error result %+v: %s", r.Error, resultText(t, r))
	}
	return resultText(t, r)
}

func metaOf(t *testing.T, r tool.Result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		t.Fatalf("meta %s: %v", r.Meta, err)
	}
	return m
}

func TestBuiltinsClasses(t *testing.T) {
	got := map[string][2]bool{}
	for _, tl := range tool.Builtins(tool.BuiltinOptions{}) {
		got[tl.Name] = [2]bool{tl.Parallel, tl.Idempotent}
	}
	want := map[string][2]bool{"read_file": {true, true}, "list_dir": {true, true}, "write_file": {false, true}}
	if len(got) != len(want) {
		t.Fatalf("builtins without RunCommand: %v", got)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: parallel,idempotent = %v, want %v", n, got[n], w)
		}
	}
	with := tool.Builtins(tool.BuiltinOptions{RunCommand: true})
	last := with[len(with)-1]
	if len(with) != 4 || last.Name != "run_command" || last.Parallel || last.Idempotent {
		t.Errorf("run_command: %d tools, last %s parallel=%v idempotent=%v", len(with), last.Name, last.Parallel, last.Idempotent)
	}
}

func TestReadFile(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	writeFile(t, filepath.Join(s.cwd, "dir", "a.txt"), "one\ntwo\nthree\nfour\n")
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "dir/a.txt"})); got != "one\ntwo\nthree\nfour\n" {
		t.Errorf("whole file: %q", got)
	}
	res := s.run(t, "read_file", map[string]any{"path": "dir/a.txt", "offset": 2, "limit": 2})
	if got := wantOK(t, res); got != "two\nthree\n[truncated: showing lines 2-3; continue with offset 4]" {
		t.Errorf("range: %q", got)
	}
	if m := metaOf(t, res); m["startLine"] != 2.0 || m["endLine"] != 3.0 || m["truncated"] != true {
		t.Errorf("meta %v", m)
	}
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "dir/a.txt", "offset": 4})); got != "four\n" {
		t.Errorf("last line: %q", got)
	}
	abs := filepath.Join(s.cwd, "dir", "a.txt")
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": abs, "limit": 1})); !strings.HasPrefix(got, "one\n") {
		t.Errorf("absolute path inside: %q", got)
	}
	writeFile(t, filepath.Join(s.cwd, "empty"), "")
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "empty"})); got != "(empty file)" {
		t.Errorf("empty: %q", got)
	}
	writeFile(t, filepath.Join(s.cwd, "latin1"), "caf\xe9\n")
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "latin1"})); got != "caf\uFFFD\n" {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

func TestReadFileErrors(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	writeFile(t, filepath.Join(s.cwd, "a.txt"), "x\ny\n")
	writeFile(t, filepath.Join(s.cwd, "bin"), "ELF\x00\x01\x02")
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing", map[string]any{"path": "nope.txt"}, `Error: tool "read_file" failed: "nope.txt" does not exist: file does not exist`},
		{"directory", map[string]any{"path": "."}, `Error: tool "read_file" failed: "." is a directory, not a file; use list_dir to see its entries`},
		{"binary", map[string]any{"path": "bin"}, `Error: tool "read_file" failed: "bin" looks like a binary file (it contains NUL bytes); read_file only reads text`},
		{"offset past end", map[string]any{"path": "a.txt", "offset": 5}, `Error: tool "read_file" failed: offset 5 is past the end of "a.txt" (2 lines)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := wantError(t, s.run(t, "read_file", c.args), "ToolFailedError", "TOOL_FAILED")
			if text != c.want {
				t.Errorf("text %q\nwant %q", text, c.want)
			}
		})
	}
	text := wantError(t, s.run(t, "read_file", map[string]any{"path": "a.txt", "offset": 0}), "InvalidArgumentsError", "INVALID_ARGUMENTS")
	if !strings.HasSuffix(text, "property \"offset\": minimum: got 0, want 1") {
		t.Errorf("offset 0: %q", text)
	}
	text = wantError(t, s.run(t, "read_file", map[string]any{"path": "a.txt", "limit": 1000000001}), "InvalidArgumentsError", "INVALID_ARGUMENTS")
	if !strings.HasSuffix(text, "property \"limit\": maximum: got 1000000001, want 1000000000") {
		t.Errorf("limit too large: %q", text)
	}
}

func TestReadFileCapsOutput(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{MaxOutputBytes: 10})
	writeFile(t, filepath.Join(s.cwd, "lines"), "aaaa\nbbbb\ncccc\n")
	res := s.run(t, "read_file", map[string]any{"path": "lines"})
	if got := wantOK(t, res); got != "aaaa\nbbbb\n[truncated: showing lines 1-2; continue with offset 3]" {
		t.Errorf("capped: %q", got)
	}
	if m := metaOf(t, res); m["bytes"] != 10.0 || m["truncated"] != true {
		t.Errorf("meta %v", m)
	}
	writeFile(t, filepath.Join(s.cwd, "long"), strings.Repeat("é", 20)+"\nnext\n")
	got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "long"}))
	if got != "ééééé\n[truncated: line 1 is longer than the 10-byte output cap; only its start is shown]" {
		t.Errorf("long line: %q", got)
	}
}

// TestFileToolsConfinement checks every file tool against the escapes: a
// relative path with "..", an absolute path outside, a symbolic link to a
// file outside and one to a directory outside, while links that stay inside
// work.
func TestFileToolsConfinement(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	writeFile(t, filepath.Join(s.cwd, "sub", "real.txt"), "inside\n")
	links := map[string]string{
		"secret-link": s.secret,                          // file outside
		"out-link":    filepath.Join(s.parent, "outdir"), // directory outside
		"rel-escape":  "../secret.txt",                   // relative link outside
		"in-link":     "sub/real.txt",                    // file inside
		"in-dir":      "sub",                             // directory inside
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(s.cwd, name)); err != nil {
			t.Fatal(err)
		}
	}
	escapes := []string{"../secret.txt", "sub/../../secret.txt", s.secret, "/etc/hostname", "secret-link", "rel-escape", "out-link/inner.txt"}
	for _, p := range escapes {
		t.Run("read "+p, func(t *testing.T) {
			text := wantError(t, s.run(t, "read_file", map[string]any{"path": p}), "OutsideCwdError", "OUTSIDE_CWD")
			if strings.Contains(text, "secret\n") || strings.Contains(text, "outside inner") || !strings.Contains(text, p) {
				t.Errorf("text %q", text)
			}
		})
		t.Run("write "+p, func(t *testing.T) {
			text := wantError(t, s.run(t, "write_file", map[string]any{"path": p, "content": "pwned"}), "OutsideCwdError", "OUTSIDE_CWD")
			if !strings.Contains(text, p) {
				t.Errorf("text %q", text)
			}
		})
	}
	exact := map[string]string{
		"../secret.txt": `Error: outside the working directory: path "../secret.txt" leaves the working directory`,
		s.secret:        `Error: outside the working directory: path "` + s.secret + `" is outside the working directory ` + s.cwd,
		"secret-link":   `Error: outside the working directory: path "secret-link" resolves outside the working directory (through a symbolic link)`,
	}
	for p, want := range exact {
		if text := resultText(t, s.run(t, "read_file", map[string]any{"path": p})); text != want {
			t.Errorf("read %s: %q\nwant %q", p, text, want)
		}
	}
	for _, p := range []string{"..", "../outdir", filepath.Join(s.parent, "outdir"), "out-link", "/"} {
		t.Run("list "+p, func(t *testing.T) {
			wantError(t, s.run(t, "list_dir", map[string]any{"path": p}), "OutsideCwdError", "OUTSIDE_CWD")
		})
	}
	// Writing below a link to a directory outside must not create it there.
	wantError(t, s.run(t, "write_file", map[string]any{"path": "out-link/new/x.txt", "content": "pwned"}), "OutsideCwdError", "OUTSIDE_CWD")
	if _, err := os.Stat(filepath.Join(s.parent, "outdir", "new")); !os.IsNotExist(err) {
		t.Errorf("write_file created a directory outside: %v", err)
	}
	if b, _ := os.ReadFile(s.secret); string(b) != "top secret\n" {
		t.Errorf("the file outside changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(s.parent, "outdir", "inner.txt")); string(b) != "outside inner\n" {
		t.Errorf("the file outside the link changed: %q", b)
	}

	// Links that stay inside work.
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "in-link"})); got != "inside\n" {
		t.Errorf("in-link: %q", got)
	}
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "in-dir/real.txt"})); got != "inside\n" {
		t.Errorf("in-dir: %q", got)
	}
	if got := wantOK(t, s.run(t, "read_file", map[string]any{"path": "sub/../sub/real.txt"})); got != "inside\n" {
		t.Errorf("dot-dot inside: %q", got)
	}
	wantOK(t, s.run(t, "write_file", map[string]any{"path": "in-dir/via-link.txt", "content": "ok"}))
	if b, err := os.ReadFile(filepath.Join(s.cwd, "sub", "via-link.txt")); err != nil || string(b) != "ok" {
		t.Errorf("write through a link inside: %q %v", b, err)
	}
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{"path": "in-dir"})); got != "real.txt\nvia-link.txt" {
		t.Errorf("list through a link inside: %q", got)
	}
}

func TestFileToolsWithoutCwd(t *testing.T) {
	reg, err := tool.NewRegistry(tool.Builtins(tool.BuiltinOptions{RunCommand: true})...)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]string{
		"read_file":   `{"path":"a.txt"}`,
		"list_dir":    `{}`,
		"write_file":  `{"path":"a.txt","content":"x"}`,
		"run_command": `{"command":"true"}`,
	} {
		res := reg.Execute(context.Background(), name, tool.Call{Arguments: json.RawMessage(args)})
		text := wantError(t, res, "OutsideCwdError", "OUTSIDE_CWD")
		if !strings.HasPrefix(text, "Error: outside the working directory: this session has no working directory") {
			t.Errorf("%s: %q", name, text)
		}
	}
}

func TestListDir(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	for _, p := range []string{"b.txt", "a.txt", "zdir/x", "Cdir/y", ".hidden"} {
		writeFile(t, filepath.Join(s.cwd, p), "x")
	}
	if err := os.Mkdir(filepath.Join(s.cwd, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := ".hidden\nCdir/\na.txt\nb.txt\nempty/\nzdir/"
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{})); got != want {
		t.Errorf("list .: %q\nwant %q", got, want)
	}
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{"path": s.cwd})); got != want {
		t.Errorf("list absolute cwd: %q", got)
	}
	if got := wantOK(t, s.run(t, "list_dir", map[string]any{"path": "empty"})); got != "(empty directory)" {
		t.Errorf("empty: %q", got)
	}
	text := wantError(t, s.run(t, "list_dir", map[string]any{"path": "a.txt"}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "list_dir" failed: "a.txt" is not a directory; use read_file to read a file` {
		t.Errorf("file: %q", text)
	}
	text = wantError(t, s.run(t, "list_dir", map[string]any{"path": "nope"}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "list_dir" failed: "nope" does not exist: file does not exist` {
		t.Errorf("missing: %q", text)
	}
}

func TestListDirCapsOutput(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{MaxOutputBytes: 12})
	for _, p := range []string{"aaa", "bbb", "ccc", "ddd"} {
		writeFile(t, filepath.Join(s.cwd, p), "x")
	}
	res := s.run(t, "list_dir", map[string]any{})
	if got := wantOK(t, res); got != "aaa\nbbb\nccc\n[truncated: showing 3 of 4 entries]" {
		t.Errorf("capped: %q", got)
	}
	if m := metaOf(t, res); m["entries"] != 4.0 || m["shown"] != 3.0 || m["truncated"] != true {
		t.Errorf("meta %v", m)
	}
}

func TestWriteFile(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	res := s.run(t, "write_file", map[string]any{"path": "deep/er/new.txt", "content": "hello"})
	if got := wantOK(t, res); got != "Created deep/er/new.txt (5 bytes)" {
		t.Errorf("create: %q", got)
	}
	if m := metaOf(t, res); m["created"] != true || m["bytes"] != 5.0 {
		t.Errorf("meta %v", m)
	}
	p := filepath.Join(s.cwd, "deep", "er", "new.txt")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	// Idempotent: writing the same content again gives the same file.
	for range 2 {
		if got := wantOK(t, s.run(t, "write_file", map[string]any{"path": "deep/er/new.txt", "content": "bye"})); got != "Updated deep/er/new.txt (3 bytes)" {
			t.Errorf("update: %q", got)
		}
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "bye" {
		t.Fatalf("content %q %v", b, err)
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the old 0600 kept", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Join(s.cwd, "deep", "er"))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	wantOK(t, s.run(t, "write_file", map[string]any{"path": filepath.Join(s.cwd, "abs.txt"), "content": ""}))
	if b, err := os.ReadFile(filepath.Join(s.cwd, "abs.txt")); err != nil || len(b) != 0 {
		t.Errorf("absolute inside: %q %v", b, err)
	}
}

func TestWriteFileErrors(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	writeFile(t, filepath.Join(s.cwd, "file"), "x")
	if err := os.Mkdir(filepath.Join(s.cwd, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := wantError(t, s.run(t, "write_file", map[string]any{"path": "dir", "content": "x"}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "write_file" failed: "dir" is a directory; write_file writes files` {
		t.Errorf("dir: %q", text)
	}
	text = wantError(t, s.run(t, "write_file", map[string]any{"path": ".", "content": "x"}), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "write_file" failed: "." is the working directory itself, not a file path` {
		t.Errorf("dot: %q", text)
	}
	text = wantError(t, s.run(t, "write_file", map[string]any{"path": "file/child", "content": "x"}), "ToolFailedError", "TOOL_FAILED")
	if !strings.HasPrefix(text, `Error: tool "write_file" failed: creating the parent directories: `) {
		t.Errorf("parent is a file: %q", text)
	}
	text = wantError(t, s.run(t, "write_file", map[string]any{"path": "x"}), "InvalidArgumentsError", "INVALID_ARGUMENTS")
	if !strings.HasSuffix(text, "arguments: missing property 'content'") {
		t.Errorf("no content: %q", text)
	}
	if b, _ := os.ReadFile(filepath.Join(s.cwd, "file")); string(b) != "x" {
		t.Errorf("file changed: %q", b)
	}
}

func TestFileToolsConcurrent(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			p := fmt.Sprintf("d%d/f.txt", i%4)
			for j := range 20 {
				content := fmt.Sprintf("writer %d round %d\n", i, j)
				if res := s.run(t, "write_file", map[string]any{"path": p, "content": content}); res.IsError {
					t.Errorf("write: %s", resultText(t, res))
					return
				}
				res := s.run(t, "read_file", map[string]any{"path": p})
				// Atomic replacement: a reader sees one writer's whole content.
				if text := resultText(t, res); res.IsError || !strings.HasPrefix(text, "writer ") || strings.Count(text, "\n") != 1 {
					t.Errorf("read %q", text)
					return
				}
				if res := s.run(t, "list_dir", map[string]any{}); res.IsError {
					t.Errorf("list: %s", resultText(t, res))
					return
				}
			}
		})
	}
	wg.Wait()
}
