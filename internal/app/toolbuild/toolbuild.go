// Package toolbuild finds the tools/ module of a sessionflow checkout and
// builds its binaries once into a cache directory, under a file lock that
// makes concurrent callers, in one process or several, build at most once.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package toolbuild

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Module is the module path of the nested tools/ module.
const Module = "github.com/sessionflow/sessionflow/tools"

// SourceDir returns the source directory of this package, "" when it is not
// known; a search for the checkout tries it after the working directory.
func SourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(file)
	}
	return ""
}

// FindRoot walks up from dir to the first directory whose tools/go.mod
// declares Module and returns it (the root of the sessionflow checkout).
func FindRoot(dir string) (string, bool) {
	return FindUp(dir, func(d string) bool { return IsToolsModule(filepath.Join(d, "tools", "go.mod")) })
}

// FindUp walks up from dir (made absolute) to the first directory match
// accepts and returns it; false when no directory up to the file system's
// root matches.
func FindUp(dir string, match func(dir string) bool) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if match(dir) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// IsToolsModule reports whether the go.mod file gomod declares Module.
func IsToolsModule(gomod string) bool { return DeclaresModule(gomod, Module) }

// DeclaresModule reports whether the go.mod file gomod declares the module
// path module; a file that cannot be read declares nothing.
func DeclaresModule(gomod, module string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == module
		}
	}
	return false
}

// IsExecutable reports whether path is a regular file that can be executed.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return runtime.GOOS == "windows" || fi.Mode().Perm()&0o111 != 0
}

// Tail returns at most n trailing bytes of b.
func Tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// GoBuild runs `go build <flags> -o out pkg` in the module directory dir
// with GOWORK=off; a failure carries the tail of the build's output.
func GoBuild(ctx context.Context, dir, out, pkg string, flags ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build %s: %w", pkg, err)
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var outBuf bytes.Buffer
	cmd.Stdout = &outBuf
	cmd.Stderr = &outBuf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, Tail(outBuf.Bytes(), 4096))
	}
	return nil
}

// Texts are the messages and error texts of one Build, in its caller's
// words.
type Texts struct {
	// CacheDir names the cache directory: "creating <CacheDir>: ...".
	CacheDir string
	// OpenLock names the lock file: "opening <OpenLock>: ...".
	OpenLock string
	// WaitLock names the lock waited for: "waiting for <WaitLock>: ...".
	WaitLock string
	// Waiting is printed once when another process holds the lock; %s is
	// the lock path.
	Waiting string
	// Building is printed when the build starts.
	Building string
	// Still is printed every ProgressEvery during the build; %s is the
	// elapsed time.
	Still string
	// Built is printed after the build; the arguments are the elapsed time
	// and the binary.
	Built string
	// BuildFailed wraps an error of the build.
	BuildFailed func(error) error
	// InstallFailed wraps an error of moving the built binary into place.
	InstallFailed func(error) error
}

// Build builds one binary into the cache.
type Build struct {
	// Bin is the binary's path in the cache directory; the lock is
	// Bin+".lock" and the build writes Bin+".tmp" first.
	Bin string
	// Dir is the directory the build runs in (the tools/ module).
	Dir string
	// Run builds into out.
	Run func(ctx context.Context, dir, out string) error
	// Progress receives the progress lines; nil discards them.
	Progress io.Writer
	// PollEvery is how often a held lock is tried again.
	PollEvery time.Duration
	// ProgressEvery is how often Still is printed; 0 never.
	ProgressEvery time.Duration
	// OnWait, when set, is called once when another process holds the lock.
	OnWait func()
	// Texts are the messages and error texts.
	Texts Texts
}

func (b *Build) progressf(format string, args ...any) {
	if b.Progress != nil {
		fmt.Fprintf(b.Progress, format+"\n", args...)
	}
}

// Locked returns Bin, building it under the cache directory's lock unless
// another caller built it while this one waited for the lock.
func (b *Build) Locked(ctx context.Context) (string, error) {
	if err := os.MkdirAll(filepath.Dir(b.Bin), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", b.Texts.CacheDir, err)
	}
	lockPath := b.Bin + ".lock"
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", b.Texts.OpenLock, err)
	}
	defer lf.Close()
	for waited := false; ; {
		ok, err := TryLock(lf)
		if err != nil {
			return "", fmt.Errorf("locking %s: %w", lockPath, err)
		}
		if ok {
			break
		}
		if !waited {
			waited = true
			b.progressf(b.Texts.Waiting, lockPath)
			if b.OnWait != nil {
				b.OnWait()
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s: %w", b.Texts.WaitLock, ctx.Err())
		case <-time.After(b.PollEvery):
		}
	}
	defer func() { _ = Unlock(lf) }()

	if IsExecutable(b.Bin) {
		return b.Bin, nil
	}
	tmp := b.Bin + ".tmp"
	_ = os.Remove(tmp)
	b.progressf("%s", b.Texts.Building)
	start := time.Now()
	stopTicker := b.tick(start)
	err = b.Run(ctx, b.Dir, tmp)
	stopTicker()
	if err == nil && !IsExecutable(tmp) {
		err = fmt.Errorf("the build produced no executable at %s", tmp)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", b.Texts.BuildFailed(err)
	}
	if err := os.Rename(tmp, b.Bin); err != nil {
		_ = os.Remove(tmp)
		return "", b.Texts.InstallFailed(err)
	}
	b.progressf(b.Texts.Built, time.Since(start).Round(time.Second), b.Bin)
	return b.Bin, nil
}

// tick prints Still every ProgressEvery until the returned function is
// called; that function waits for the printer to finish.
func (b *Build) tick(start time.Time) func() {
	if b.Progress == nil || b.ProgressEvery <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(b.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				b.progressf(b.Texts.Still, now.Sub(start).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
