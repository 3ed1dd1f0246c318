package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/tool"
	sbx "github.com/sessionflow/sessionflow/tool/sandbox"
)

// The escape tests run run_command under a confined mode and try to write
// what the mode forbids; each attempt must fail with the sandbox's error
// (the kernel's denial, the result's denial marker) and leave its target
// untouched. Each was seen failing with the helper's confinement removed.

// command runs command under mode (and network) in s's cwd.
func (s *sandbox) command(t *testing.T, mode string, network bool, command string) tool.Result {
	t.Helper()
	b, err := json.Marshal(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return s.reg.Execute(context.Background(), "run_command", tool.Call{SessionID: "s", CallID: "c", Cwd: s.cwd,
		Arguments: b, SandboxMode: mode, NetworkAccess: network})
}

// wantDenied checks that res is a failed command whose text shows the
// sandbox's denial under mode, and returns the text.
func wantDenied(t *testing.T, res tool.Result, mode string) string {
	t.Helper()
	text := wantError(t, res, "CommandFailedError", "COMMAND_FAILED")
	// The denial marker, then the harness's escalation hint
	// (escalationHintMarker('command') of @deepseek-ai/dsh-sandbox), then
	// the exit marker, as the harness's bash tool renders a denial.
	if !strings.Contains(text, "[sandbox: file access denied under "+mode+" mode]\n"+
		"[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]\n"+
		"[exit code: ") {
		t.Fatalf("text %q: want the denial marker of %s and the escalation hint", text, mode)
	}
	if m := metaOf(t, res); fmt.Sprint(m["sandbox"]) != "map[denied:true mode:"+mode+"]" {
		t.Errorf("meta %v", m)
	}
	return text
}

// wantAbsent fails when p exists.
func wantAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("%s was written", p)
	}
}

// wantContent fails when p does not hold content.
func wantContent(t *testing.T, p, content string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", p, b, content)
	}
}

const ww = "workspace-write"

func TestSandboxWorkspaceWriteEscapes(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	outdir := filepath.Join(s.parent, "outdir")
	t.Run("absolute path", func(t *testing.T) {
		target := filepath.Join(outdir, "abs.txt")
		text := wantDenied(t, s.command(t, ww, false, "echo pwned > "+target), ww)
		if !strings.HasPrefix(text, "sh: 1: cannot create "+target+": Permission denied\n") {
			t.Errorf("text %q", text)
		}
		wantAbsent(t, target)
		wantDenied(t, s.command(t, ww, false, "echo pwned >> "+s.secret), ww)
		wantContent(t, s.secret, "top secret\n")
		wantDenied(t, s.command(t, ww, false, "rm "+filepath.Join(outdir, "inner.txt")), ww)
		wantContent(t, filepath.Join(outdir, "inner.txt"), "outside inner\n")
		wantDenied(t, s.command(t, ww, false, "truncate -s 0 "+s.secret), ww)
		wantContent(t, s.secret, "top secret\n")
	})
	t.Run("dot-dot", func(t *testing.T) {
		wantDenied(t, s.command(t, ww, false, "echo pwned > ../outdir/dots.txt"), ww)
		wantAbsent(t, filepath.Join(outdir, "dots.txt"))
		wantDenied(t, s.command(t, ww, false, "mv ../secret.txt ./taken.txt"), ww)
		wantContent(t, s.secret, "top secret\n")
	})
	t.Run("symbolic link planted by an earlier command", func(t *testing.T) {
		wantOK(t, s.command(t, ww, false, "ln -s ../outdir link && ln -s ../secret.txt secret-link"))
		wantDenied(t, s.command(t, ww, false, "echo pwned > link/via-link.txt"), ww)
		wantAbsent(t, filepath.Join(outdir, "via-link.txt"))
		wantDenied(t, s.command(t, ww, false, "echo pwned > secret-link"), ww)
		wantContent(t, s.secret, "top secret\n")
	})
	t.Run("hard link", func(t *testing.T) {
		text := wantDenied(t, s.command(t, ww, false, "ln ../secret.txt hard && echo pwned > hard"), ww)
		if !strings.Contains(text, "Invalid cross-device link") {
			t.Errorf("text %q", text)
		}
		wantContent(t, s.secret, "top secret\n")
	})
	t.Run("/proc/self/root", func(t *testing.T) {
		target := filepath.Join(outdir, "proc-root.txt")
		wantDenied(t, s.command(t, ww, false, "echo pwned > /proc/self/root"+target), ww)
		wantAbsent(t, target)
	})
	t.Run("/proc/pid/cwd of another process", func(t *testing.T) {
		other := exec.Command("sleep", "60")
		other.Dir = outdir
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
		wantDenied(t, s.command(t, ww, false, fmt.Sprintf("echo pwned > /proc/%d/cwd/proc-cwd.txt", other.Process.Pid)), ww)
		wantAbsent(t, filepath.Join(outdir, "proc-cwd.txt"))
		// The worker's own cwd, and its root.
		wantDenied(t, s.command(t, ww, false, "echo pwned > /proc/$PPID/cwd/proc-ppid.txt"), ww)
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, filepath.Join(wd, "proc-ppid.txt"))
		wantDenied(t, s.command(t, ww, false, fmt.Sprintf("echo pwned > /proc/$PPID/root%s/proc-proot.txt", outdir)), ww)
		wantAbsent(t, filepath.Join(outdir, "proc-proot.txt"))
	})
	t.Run("a background process that outlives the command", func(t *testing.T) {
		// env -i drops the call's mark and setsid leaves its process
		// group, so the call's end does not kill it: it writes after the
		// command returned, and stays confined.
		target := filepath.Join(outdir, "background.txt")
		res := s.command(t, ww, false, "env -i PATH=\"$PATH\" setsid sh -c 'echo $$ > bg.pid; sleep 1; echo pwned 2> bg.err > "+target+
			"; echo $? > bg.tmp; mv bg.tmp bg.status' > /dev/null 2>&1 < /dev/null & until [ -s bg.pid ]; do sleep 0.01; done")
		wantOK(t, res)
		status := waitFile(t, filepath.Join(s.cwd, "bg.status"))
		if status == "0\n" {
			t.Errorf("the background write succeeded")
		}
		wantAbsent(t, target)
		wantContent(t, filepath.Join(s.cwd, "bg.err"), "sh: 1: cannot create "+target+": Permission denied\n")
	})
	t.Run("signals to the worker", func(t *testing.T) {
		text := wantDenied(t, s.command(t, ww, false, fmt.Sprintf("kill -CONT %d", os.Getpid())), ww)
		if !strings.Contains(text, "Operation not permitted") {
			t.Errorf("text %q", text)
		}
	})
}

// waitFile waits for p to exist and returns its content.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
	return ""
}

// A setuid binary does not run with its owner's rights (no_new_privs), and
// a worker running as root runs its commands without capabilities: a file
// only its owner (nobody) may write stays unwritten, through a
// setuid-nobody copy of tee too.
func TestSandboxNoNewPrivileges(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	text := wantOK(t, s.command(t, ww, false, "grep -E '^(NoNewPrivs|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status"))
	want := "NoNewPrivs:\t1\n"
	if os.Geteuid() == 0 {
		want = "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n" + want
	}
	if !strings.HasPrefix(text, want) && !strings.Contains(text, want) {
		t.Errorf("text %q, want %q", text, want)
	}
	if os.Geteuid() != 0 {
		// Only root can make a file and a setuid binary of another user.
		return
	}
	const nobody = 65534
	owned := filepath.Join(s.cwd, "nobody-only.txt")
	writeFile(t, owned, "nobody's\n")
	tee := filepath.Join(s.cwd, "tee-as-nobody")
	b, err := os.ReadFile("/usr/bin/tee")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tee, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{owned, tee} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(owned, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tee, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	wantDenied(t, s.command(t, ww, false, "echo pwned >> nobody-only.txt"), ww)
	text = wantDenied(t, s.command(t, ww, false, "echo pwned | ./tee-as-nobody -a nobody-only.txt"), ww)
	if !strings.HasPrefix(text, "./tee-as-nobody: nobody-only.txt: Permission denied\npwned\n") {
		t.Errorf("text %q", text)
	}
	wantContent(t, owned, "nobody's\n")
}

// TCP to a listener on 127.0.0.1, and listening, are denied unless the
// session allows the network.
func TestSandboxNetwork(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			accepted <- string(b)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo hello >&3'", port)
	listen := `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1:0") or die "listen: $!\n"; print "listening\n"'`
	for _, mode := range []string{"read-only", ww} {
		text := wantDenied(t, s.command(t, mode, false, connect), mode)
		if !strings.HasPrefix(text, "bash: connect: Permission denied\n") {
			t.Errorf("%s: text %q", mode, text)
		}
		text = wantDenied(t, s.command(t, mode, false, listen), mode)
		if !strings.HasPrefix(text, "listen: Permission denied\n") {
			t.Errorf("%s: text %q", mode, text)
		}
	}
	select {
	case got := <-accepted:
		t.Fatalf("the listener accepted a connection (%q)", got)
	case <-time.After(100 * time.Millisecond):
	}
	for _, mode := range []string{"read-only", ww, "danger-full-access"} {
		wantOK(t, s.command(t, mode, true, connect))
		select {
		case got := <-accepted:
			if got != "hello\n" {
				t.Errorf("%s: the listener read %q", mode, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the allowed connection never came", mode)
		}
		if text := wantOK(t, s.command(t, mode, true, listen)); text != "listening\n[exit code: 0]" {
			t.Errorf("%s: text %q", mode, text)
		}
	}
}

// The worker's files inside the cwd (the store root and the dev server's
// state of `worker --dev`, the provider script) stay read-only: not
// written, truncated, removed or renamed, their directories neither
// removed nor renamed; the rest of the cwd stays writable.
func TestSandboxKeepsTheWorkersFiles(t *testing.T) {
	d := newDeniedSandbox(t, tool.BuiltinOptions{RunCommand: true})
	s := d.sandbox
	for _, c := range []struct{ command, says string }{
		{"echo pwned >> .sessionflow/store/proj/other.jsonl", "Read-only file system"},
		{": > .sessionflow/store/proj/other.lock", "Read-only file system"},
		{"rm -f .sessionflow/store/proj/other.lock", "Read-only file system"},
		{"echo new > .sessionflow/store/proj/new.jsonl", "Read-only file system"},
		{"echo pwned > .sessionflow/dev/temporal.db", "Read-only file system"},
		{"echo pwned > script.json", "Read-only file system"},
		{"ln .sessionflow/store/proj/other.jsonl stolen && echo pwned >> stolen", "Invalid cross-device link"},
		{"rm -rf .sessionflow; ls .sessionflow/store/proj && false", "Read-only file system"},
	} {
		text := wantDenied(t, s.command(t, ww, false, c.command), ww)
		if !strings.Contains(text, c.says) {
			t.Errorf("%s: text %q, want %q", c.command, text, c.says)
		}
	}
	// A rename out of a mount is refused (EXDEV) and mv copies instead:
	// the copy is the command's, the originals stay.
	for _, c := range []struct{ command, says string }{
		{"mv .sessionflow moved1", "Device or resource busy"},
		{"mv .sessionflow/store moved2", "Read-only file system"},
		{"mv .sessionflow/dev/temporal.db moved3", "Read-only file system"},
		{"mv script.json moved4", "Device or resource busy"},
		{"rmdir .sessionflow/dev", "Device or resource busy"},
	} {
		text := wantError(t, s.command(t, ww, false, c.command), "CommandFailedError", "COMMAND_FAILED")
		if !strings.Contains(text, c.says) {
			t.Errorf("%s: text %q, want %q", c.command, text, c.says)
		}
	}
	wantContent(t, d.log, "{\"seq\":0}\n")
	wantContent(t, d.lock, "owner\n")
	wantContent(t, d.devDB, "sqlite\n")
	wantContent(t, d.script, "{}\n")
	// Beside them, the cwd is the command's.
	wantOK(t, s.command(t, ww, false, "echo more >> mine.txt && mkdir -p .sessionflow/other && echo x > .sessionflow/other/x"))
	wantContent(t, filepath.Join(s.cwd, "mine.txt"), "mine\nmore\n")
	// The bind mounts were the command's alone.
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), s.cwd) {
		t.Errorf("the worker's mount table shows the command's mounts:\n%s", mounts)
	}
}

// The worker's files outside the cwd (its executable, a store root
// elsewhere) are not writable at all.
func TestSandboxKeepsTheWorkersFilesOutsideTheCwd(t *testing.T) {
	parent := t.TempDir()
	exe := filepath.Join(parent, "bin", "worker")
	store := filepath.Join(parent, "store")
	writeFile(t, exe, "binary\n")
	writeFile(t, filepath.Join(store, "p", "s.jsonl"), "log\n")
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true, Deny: []string{exe, store}})
	wantDenied(t, s.command(t, ww, false, "echo pwned > "+exe), ww)
	wantDenied(t, s.command(t, ww, false, "rm -rf "+store), ww)
	wantDenied(t, s.command(t, ww, false, "echo pwned > "+filepath.Join(store, "p", "s.jsonl")), ww)
	wantContent(t, exe, "binary\n")
	wantContent(t, filepath.Join(store, "p", "s.jsonl"), "log\n")
}

// workspace-write writes the cwd and a private temporary directory of the
// call, which TMPDIR names and which is gone when the call ends.
func TestSandboxWorkspaceWrite(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	text := wantOK(t, s.command(t, ww, false, `echo in > in.txt && mkdir -p d/e && mv in.txt d/e/ && echo "$TMPDIR" && echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && ls -ld "$TMPDIR" | cut -c1-10`))
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[1] != "t" || lines[2] != "drwx------" || lines[3] != "[exit code: 0]" {
		t.Fatalf("text %q", text)
	}
	tmp := lines[0]
	if !strings.HasPrefix(filepath.Base(tmp), fmt.Sprintf("sessionflow-cmd-%d-", os.Getpid())) {
		t.Errorf("TMPDIR %q", tmp)
	}
	wantAbsent(t, tmp)
	wantContent(t, filepath.Join(s.cwd, "d", "e", "in.txt"), "in\n")
	other := wantOK(t, s.command(t, ww, false, `echo "$TMPDIR"`))
	if other == tmp+"\n[exit code: 0]" {
		t.Errorf("two calls share the temporary directory %s", tmp)
	}
	// The directory holding the temporary directories is not writable.
	planted := filepath.Join(filepath.Dir(tmp), fmt.Sprintf("sessionflow-planted-%d", os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(planted) })
	wantDenied(t, s.command(t, ww, false, `echo pwned > "$(dirname "$TMPDIR")/`+filepath.Base(planted)+`"`), ww)
	wantAbsent(t, planted)
}

// read-only writes nowhere but /dev/null: not the cwd, not a temporary
// directory, not /dev/shm; write_file is refused with FS_SANDBOX_DENIED.
func TestSandboxReadOnly(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	const ro = "read-only"
	writeFile(t, filepath.Join(s.cwd, "a.txt"), "a\n")
	if text := wantOK(t, s.command(t, ro, false, "cat a.txt; ls / > /dev/null && echo read-ok")); text != "a\nread-ok\n[exit code: 0]" {
		t.Errorf("text %q", text)
	}
	wantDenied(t, s.command(t, ro, false, "echo pwned > a.txt"), ro)
	wantDenied(t, s.command(t, ro, false, "echo new > new.txt"), ro)
	wantDenied(t, s.command(t, ro, false, "rm a.txt"), ro)
	wantDenied(t, s.command(t, ro, false, "mkdir d"), ro)
	wantDenied(t, s.command(t, ro, false, `echo pwned > "${TMPDIR:-/tmp}/sessionflow-ro-$$"`), ro)
	shm := fmt.Sprintf("/dev/shm/sessionflow-ro-%d", os.Getpid())
	t.Cleanup(func() { _ = os.Remove(shm) })
	wantDenied(t, s.command(t, ro, false, "echo pwned > "+shm), ro)
	wantAbsent(t, shm)
	wantContent(t, filepath.Join(s.cwd, "a.txt"), "a\n")
	wantAbsent(t, filepath.Join(s.cwd, "new.txt"))

	b, _ := json.Marshal(map[string]any{"path": "a.txt", "content": "pwned"})
	res := s.reg.Execute(context.Background(), "write_file", tool.Call{Cwd: s.cwd, Arguments: b, SandboxMode: ro})
	if text := wantError(t, res, "SandboxDeniedError", "FS_SANDBOX_DENIED"); text != `Error: cannot write "a.txt": file access denied under read-only mode` {
		t.Errorf("write_file text %q", text)
	}
	wantContent(t, filepath.Join(s.cwd, "a.txt"), "a\n")
	// Reading stays allowed.
	b, _ = json.Marshal(map[string]any{"path": "a.txt"})
	wantOK(t, s.reg.Execute(context.Background(), "read_file", tool.Call{Cwd: s.cwd, Arguments: b, SandboxMode: ro}))
}

// danger-full-access runs the command as the worker runs, unconfined.
func TestSandboxDangerFullAccess(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	target := filepath.Join(s.parent, "outdir", "full.txt")
	wantOK(t, s.command(t, "danger-full-access", false, "echo written > "+target))
	wantContent(t, target, "written\n")
	res := s.command(t, "danger-full-access", false, "true")
	if m := metaOf(t, res); fmt.Sprint(m["sandbox"]) != "map[mode:danger-full-access]" {
		t.Errorf("meta %v", m)
	}
}

// A call without a mode runs in the registry's default, workspace-write
// unless BuiltinOptions says otherwise; an unknown mode runs nothing.
func TestSandboxDefaultMode(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	target := filepath.Join(s.parent, "outdir", "default.txt")
	wantDenied(t, s.command(t, "", false, "echo pwned > "+target), ww)
	wantOK(t, s.command(t, "", false, "echo mine > mine.txt"))
	ro := newSandbox(t, tool.BuiltinOptions{RunCommand: true, DefaultSandboxMode: "read-only"})
	wantDenied(t, ro.command(t, "", false, "echo pwned > mine.txt"), "read-only")
	text := wantError(t, s.command(t, "none", false, "echo ran > ran.txt"), "ToolFailedError", "TOOL_FAILED")
	if text != `Error: tool "run_command" failed: unknown sandbox mode "none" (want "read-only", "workspace-write" or "danger-full-access")` {
		t.Errorf("text %q", text)
	}
	wantAbsent(t, filepath.Join(s.cwd, "ran.txt"))
}

// Where Landlock is missing or too old, a confined command does not run
// and the result says SANDBOX_UNAVAILABLE; danger-full-access still runs.
func TestSandboxUnavailable(t *testing.T) {
	for _, c := range []struct {
		abi    int
		detail string
	}{
		{0, "this kernel has no Landlock (Linux 6.12 or later with Landlock enabled at boot, lsm=landlock, gives the ABI 6 the sandbox needs)"},
		{5, "this kernel's Landlock ABI is 5 and the sandbox needs 6 (Linux 6.12 or later): file writes, TCP, and the scoping of signals and abstract unix sockets"},
	} {
		abi := c.abi
		s := newSandbox(t, tool.BuiltinOptions{RunCommand: true, Sandbox: sbx.Sandbox{ABI: func() int { return abi }}})
		for _, mode := range []string{"read-only", ww} {
			res := s.command(t, mode, true, "echo ran > ran.txt")
			text := wantError(t, res, "SandboxUnavailableError", "SANDBOX_UNAVAILABLE")
			want := `Error: sandbox mode "` + mode + `" is requested but the sandbox cannot be enforced on this host: ` + c.detail +
				`; refusing to run the command unconfined (a session whose agentOptions.sandboxMode is "danger-full-access" runs commands unconfined)`
			if text != want {
				t.Errorf("ABI %d, %s: text\n%q\nwant\n%q", abi, mode, text, want)
			}
			if m := metaOf(t, res); fmt.Sprint(m["sandbox"]) != "map[mode:"+mode+" network:true]" || m["exitCode"] != -1.0 {
				t.Errorf("meta %v", m)
			}
			wantAbsent(t, filepath.Join(s.cwd, "ran.txt"))
		}
		wantOK(t, s.command(t, "danger-full-access", false, "echo ran > ran.txt"))
		wantContent(t, filepath.Join(s.cwd, "ran.txt"), "ran\n")
	}
}

// The confined command has no controlling terminal: it runs in a session
// of its own.
func TestSandboxNewSession(t *testing.T) {
	s := newSandbox(t, tool.BuiltinOptions{RunCommand: true})
	text := wantOK(t, s.command(t, ww, false, `cut -d' ' -f6 /proc/$$/stat; echo $$`))
	f := strings.Fields(text)
	if len(f) < 2 || f[0] != f[1] {
		t.Errorf("text %q: the shell does not lead its session", text)
	}
	if sid, _ := unix.Getsid(0); fmt.Sprint(sid) == f[0] {
		t.Errorf("the command shares the worker's session")
	}
}

// A worker that is not root confines its commands too: the read-only
// binds of the worker's files need a user namespace then. Run as root,
// this test runs the escape tests again as nobody (65534), in a copy of
// the test binary; run as another user, the tests above did so already.
func TestSandboxAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		return
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "sessionflow-as-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tool.test")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestSandbox(WorkspaceWriteEscapes|NoNewPrivileges|Network|KeepsTheWorkersFiles|WorkspaceWrite|ReadOnly)$", "-test.count=1", "-test.v")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "HOME=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, name := range []string{"WorkspaceWriteEscapes", "NoNewPrivileges", "Network", "KeepsTheWorkersFiles", "WorkspaceWrite", "ReadOnly"} {
		if !strings.Contains(string(out), "--- PASS: TestSandbox"+name+" ") {
			t.Errorf("as nobody, TestSandbox%s did not pass:\n%s", name, out)
		}
	}
}
